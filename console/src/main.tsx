import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { createBrowserRouter, RouterProvider } from "react-router";
import { Layout } from "./components/Layout";
import { Login } from "./pages/Login";
import { Fleet } from "./pages/Fleet";
import { ClusterDetail } from "./pages/ClusterDetail";
import { Projects } from "./pages/Projects";
import { Apps } from "./pages/Apps";
import { AppDetail } from "./pages/AppDetail";
import { AppEdit } from "./pages/AppEdit";
import { AddonDetail, Addons } from "./pages/Addons";
import { TemplateDeploy, Templates } from "./pages/Templates";
import { Members } from "./pages/Members";
import { Alerts } from "./pages/Alerts";
import { AppLogs } from "./pages/AppLogs";
import { Audit } from "./pages/Audit";
import "./styles.css";

// Every page of an organization is under `/orgs/{org}`; the Layout redirects an address
// without one (links from before, `/`) into the organization last shown.
const router = createBrowserRouter([
  { path: "/login", element: <Login /> },
  {
    element: <Layout />,
    children: [
      {
        path: "/orgs/:org",
        children: [
          { index: true, element: <Fleet /> },
          { path: "clusters/:id", element: <ClusterDetail /> },
          { path: "projects", element: <Projects /> },
          { path: "projects/:project/apps", element: <Apps /> },
          { path: "apps", element: <Apps /> },
          { path: "apps/new", element: <AppEdit /> },
          { path: "apps/:id", element: <AppDetail /> },
          { path: "apps/:id/edit", element: <AppEdit /> },
          { path: "apps/:id/logs", element: <AppLogs /> },
          { path: "addons", element: <Addons /> },
          { path: "addons/:id", element: <AddonDetail /> },
          { path: "templates", element: <Templates /> },
          { path: "templates/:id", element: <TemplateDeploy /> },
          { path: "members", element: <Members /> },
          { path: "alerts", element: <Alerts /> },
          { path: "audit", element: <Audit /> },
          { path: "*", element: <p>No such page.</p> },
        ],
      },
      { path: "*", element: null },
    ],
  },
]);

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <RouterProvider router={router} />
  </StrictMode>,
);
