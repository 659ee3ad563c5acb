//! Every command of the `kubenest` binary, run as a user runs it, against the whole system (kwok
//! clusters): contexts and logins, `-o wide|json|yaml|name`, `--dry-run=server`, `apps diff`,
//! `--watch`, the exit statuses that tell not found, refused and "differences found" apart,
//! and a completion script. The last check walks the CLI's own command tree: a command no step
//! here ran fails the test, so a new command comes with its run.

mod kit;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{fixture, run};
use kit::{Kubenest, app_file, every_command, ingress_ca, write};

const PASSWORD: &str = "a-long-enough-password";

#[test]
fn every_command_runs_as_the_binary_with_the_exit_status_that_says_what_happened() {
    run(async {
        let f = fixture().await;
        let options = f.system.options().clone();
        let (org, api) = (options.org.clone(), f.system.api_url());
        let cluster = "east";
        let files = tempfile::tempdir().unwrap();
        let mut k = Kubenest {
            config: tempfile::tempdir().unwrap(),
            ran: BTreeSet::new(),
        };
        let suffix = uuid::Uuid::new_v4().simple().to_string()[..6].to_owned();
        let named = |what: &str| format!("{what}-{suffix}");

        // Contexts: a login makes one and makes it current; a second one beside it.
        let admin = &options.admin_user;
        let login = k.expect_in(
            0,
            &["--api", &api, "login", "-u", admin, "--password-stdin"],
            &options.admin_password,
        );
        assert!(login.contains("context"), "{login}");
        let first = k.ok(&["context", "current"]).trim().to_owned();
        k.ok(&["context", "set-org", &org]);
        let user = named("dev");
        k.expect_in(0, &["users", "create", &user, "--password-stdin"], PASSWORD);
        k.expect_in(
            0,
            &[
                "--api",
                &api,
                "--context",
                "dev",
                "login",
                "-u",
                &user,
                "--password-stdin",
            ],
            PASSWORD,
        );
        assert_eq!(k.ok(&["context", "current"]).trim(), "dev");
        let contexts = k.json(&["context", "list"]);
        assert_eq!(contexts.as_array().unwrap().len(), 2, "{contexts}");
        k.ok(&["context", "use", &first]);
        let listed = k.ok(&["context", "list"]);
        assert!(
            listed.contains(&format!("*         {first}")) || listed.contains('*'),
            "{listed}"
        );
        k.expect(3, &["context", "use", "nowhere"]);

        // Organizations and clusters.
        assert!(
            k.ok(&["orgs", "list", "-o", "name"])
                .lines()
                .any(|l| l == org)
        );
        let other_org = named("cli-org");
        k.ok(&["orgs", "create", &other_org]);
        k.ok(&["orgs", "budget", "--cpu", "1000"]);
        k.ok(&["orgs", "usage"]);
        let wide = k.ok(&["clusters", "list", "-o", "wide"]);
        assert!(wide.lines().next().unwrap().contains("CREATED"), "{wide}");
        k.ok(&["clusters", "get", cluster]);
        k.ok(&["clusters", "budget", cluster, "--cpu", "500"]);
        // Registered clusters are not kubenest's to scale: refused.
        k.expect(4, &["clusters", "scale", cluster, "--nodes", "3"]);
        let spare = named("spare");
        let registered = k.ok(&["clusters", "register", &spare]);
        assert!(registered.contains("helm install"), "{registered}");
        k.ok(&["clusters", "rotate-token", &spare]);
        k.ok(&["clusters", "delete", &spare]);

        // A project, its members, fences, credentials and ingress CA.
        let project = named("cli");
        k.ok(&["projects", "create", &project, "--cluster", cluster]);
        let deadline = Instant::now() + Duration::from_secs(120);
        while k.json(&["projects", "get", &project])["phase"] != "Ready" {
            assert!(Instant::now() < deadline, "project {project} not Ready");
            std::thread::sleep(Duration::from_millis(500));
        }
        assert!(k.ok(&["projects", "list"]).contains(&project));
        k.ok(&["members", "add", &user, "viewer", "--project", &project]);
        assert!(
            k.ok(&["members", "list", "--project", &project])
                .contains(&user)
        );
        k.ok(&["members", "remove", &user, "--project", &project]);
        k.ok(&["projects", "fences", &project, "--cpu", "8", "--pods", "20"]);
        k.ok(&["projects", "usage", &project]);
        k.expect_in(
            0,
            &[
                "projects",
                "registry-login",
                &project,
                "--server",
                "registry.test:5000",
            ]
            .iter()
            .chain(&["--username", "puller", "--password-stdin"])
            .copied()
            .collect::<Vec<_>>(),
            "pull-secret",
        );
        k.ok(&["projects", "registry-logout", &project]);
        let (cert, key) = ingress_ca(files.path());
        k.ok(&[
            "projects",
            "ingress-ca",
            "set",
            &project,
            "--cert",
            &cert,
            "--key",
            &key,
        ]);
        assert!(
            k.ok(&["projects", "ingress-ca", "get", &project])
                .contains("BEGIN CERTIFICATE")
        );
        k.ok(&["projects", "ingress-ca", "delete", &project]);

        // Apps: a dry run keeps nothing, a diff says what an apply would change.
        let file = app_file(files.path(), &project, "nginx:1.27");
        let dry = k.ok(&["apps", "apply", "-f", &file, "--dry-run=server"]);
        assert!(dry.contains("(server dry run)"), "{dry}");
        assert_eq!(
            k.ok(&["apps", "list", "--project", &project, "-o", "name"]),
            ""
        );
        let diff = k.expect(1, &["apps", "diff", "-f", &file]);
        assert!(
            diff.contains("+++ applied/app/web") && diff.contains("+name: web"),
            "{diff}"
        );
        k.ok(&["apps", "apply", "-f", &file, "--wait", "--timeout", "120"]);
        assert_eq!(k.ok(&["apps", "diff", "-f", &file]), "");
        let changed = app_file(files.path(), &project, "nginx:1.28");
        let diff = k.expect(1, &["apps", "diff", "-f", &changed]);
        assert!(
            diff.contains("-    image: nginx:1.27") && diff.contains("+    image: nginx:1.28"),
            "{diff}"
        );
        k.ok(&[
            "apps",
            "apply",
            "-f",
            &changed,
            "--wait",
            "--timeout",
            "120",
        ]);
        assert_eq!(
            k.ok(&["apps", "list", "--project", &project, "-o", "name"]),
            "web\n"
        );
        let yaml = k.ok(&["apps", "get", "web", "--project", &project, "-o", "yaml"]);
        assert!(yaml.contains("phase: Running"), "{yaml}");
        assert!(
            k.ok(&["apps", "history", "web", "--project", &project])
                .lines()
                .count()
                >= 3
        );
        k.ok(&[
            "apps",
            "rollback",
            "web",
            "--project",
            &project,
            "--to",
            "previous",
            "--wait",
        ]);
        k.ok(&["apps", "redeploy", "web", "--project", &project, "--wait"]);

        // --watch prints the change a pause makes, from the event stream.
        let mut watch = k
            .command(&["apps", "get", "web", "--project", &project, "--watch"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        k.ran.insert("apps get".into());
        let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
        // The App's own table first, then the watch's header and rows.
        while let Some(Ok(line)) = lines.next() {
            if line.starts_with("Name:") {
                break;
            }
        }
        k.ok(&["apps", "pause", "web", "--project", &project]);
        let paused = lines
            .by_ref()
            .map_while(Result::ok)
            .find(|line| line.starts_with("web") && line.contains("Paused"));
        let _ = watch.kill();
        let _ = watch.wait();
        assert!(paused.is_some(), "the watch never printed the pause");
        k.ok(&["apps", "resume", "web", "--project", &project, "--wait"]);

        k.ok(&["apps", "logs", "web", "--project", &project, "--tail", "5"]);
        let secret = write(files.path(), "secret.env", "API_KEY=k3y\nOTHER=x\n");
        let set = k.ok(&[
            "apps",
            "secret",
            "set",
            "web",
            "--project",
            &project,
            "-c",
            "web",
            "-f",
            &secret,
        ]);
        assert!(set.contains("API_KEY") && !set.contains("k3y"), "{set}");
        k.ok(&[
            "apps",
            "secret",
            "delete",
            "web",
            "--project",
            &project,
            "-c",
            "web",
            "--key",
            "OTHER",
        ]);
        // An image workload has no repository to hold credentials for: refused.
        k.expect_in(
            4,
            &[
                "apps",
                "git-credentials",
                "set",
                "web",
                "--project",
                &project,
                "-c",
                "web",
            ]
            .iter()
            .chain(&["--username", "git", "--password-stdin"])
            .copied()
            .collect::<Vec<_>>(),
            "token",
        );
        k.expect(
            4,
            &[
                "apps",
                "git-credentials",
                "delete",
                "web",
                "--project",
                &project,
                "-c",
                "web",
            ],
        );

        // Templates.
        let template = named("tpl");
        let app_id = k_app_id(&mut k, &project);
        let place = ["--scope", "project", "--project", project.as_str()];
        let mut args = vec![
            "templates",
            "from-app",
            app_id.as_str(),
            "--name",
            &template,
        ];
        args.extend(place);
        let template_id = k.json(&args)["id"].as_str().unwrap().to_owned();
        assert!(k.ok(&["templates", "list"]).contains(&template));
        k.ok(&["templates", "get", &template_id]);
        let exported = k.ok(&["templates", "export", &template_id]);
        let export_file = write(files.path(), "template.json", &exported);
        let imported = named("imported");
        let mut args = vec![
            "templates",
            "import",
            "-f",
            &export_file,
            "--name",
            &imported,
        ];
        args.extend(place);
        k.ok(&args);
        let created_file = write(
            files.path(),
            "created.yaml",
            &format!(
                "name: {}\nscope: project\nproject: {project}\nparameters:\n- name: image\n  type: string\n\
                 components:\n- name: web\n  type: workload\n  workload_spec:\n    \
                 image: \"${{image}}\"\n    replicas: 1\n",
                named("created")
            ),
        );
        k.ok(&["templates", "create", "-f", &created_file]);
        k.ok(&[
            "templates",
            "deploy",
            &template_id,
            "--project",
            &project,
            "--name",
            "from-tpl",
        ]);
        k.ok(&["templates", "delete", &template_id]);
        // A chart the server may not fetch (its own network): the one answer for every failure
        // to read a chart, a 404 naming the field.
        let chart = named("chart");
        let mut args = vec!["templates", "from-chart", "oci://10.0.0.1/charts", "web"];
        args.extend(["--version", "1.0.0", "--name", &chart]);
        args.extend(place);
        k.expect(3, &args);

        // Addons and their catalog.
        assert!(k.ok(&["catalog", "list"]).contains("redis"));
        k.ok(&["catalog", "get", "redis"]);
        let cache = named("cache");
        k.ok(&[
            "addons",
            "create",
            &cache,
            "--project",
            &project,
            "--definition",
            "redis",
        ]);
        assert!(
            k.ok(&["addons", "list", "--project", &project])
                .contains(&cache)
        );
        k.ok(&["addons", "get", &cache]);
        let values = write(files.path(), "values.yaml", "{}\n");
        k.ok(&["addons", "set", &cache, "-f", &values]);
        // The history records a revision once the controllers have taken it: a rollback can
        // name revision 1 only when `addons get` lists it.
        let deadline = Instant::now() + Duration::from_secs(120);
        while !k.json(&["addons", "get", &cache])["revisions"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["revision"] == 1))
        {
            assert!(Instant::now() < deadline, "addon {cache} has no revision 1");
            std::thread::sleep(Duration::from_millis(500));
        }
        k.ok(&["addons", "rollback", &cache, "--revision", "1"]);
        k.ok(&["addons", "delete", &cache]);
        // The agent uninstalls it; the project can go once it has.
        let deadline = Instant::now() + Duration::from_secs(120);
        while k.run(&["addons", "get", &cache], "").status != 3 {
            assert!(Instant::now() < deadline, "addon {cache} never went");
            std::thread::sleep(Duration::from_millis(500));
        }

        // Alerts, audit, users, passwords.
        k.ok(&["alerts"]);
        k.expect(3, &["alerts", "ack", &uuid::Uuid::new_v4().to_string()]);
        assert!(k.ok(&["audit", "--limit", "5"]).lines().count() > 1);
        assert!(k.ok(&["users", "list", "-o", "name"]).contains(&user));
        k.expect_in(
            0,
            &["password", "--user", &user, "--password-stdin"],
            "another-long-password",
        );
        k.ok(&["users", "disable", &user]);
        k.ok(&["users", "enable", &user]);
        k.ok(&["users", "delete", &user]);

        // Not found and refused say so in their exit status.
        k.expect(3, &["apps", "get", "nothing-here", "--project", &project]);
        k.expect(3, &["apps", "get", &uuid::Uuid::new_v4().to_string()]);
        k.expect(4, &["clusters", "scale", cluster, "--nodes", "0"]);

        // Tidy up what the project holds, then the project.
        k.ok(&[
            "apps",
            "delete",
            "from-tpl",
            "--project",
            &project,
            "--wait",
        ]);
        k.ok(&["apps", "delete", "web", "--project", &project, "--wait"]);
        k.ok(&["projects", "delete", &project]);
        assert!(k.ok(&["completion", "bash"]).contains("_kubenest"));
        k.ok(&["context", "delete", "dev"]);
        k.ok(&["logout"]);
        k.expect(4, &["apps", "list"]);

        let missing: Vec<String> = every_command().difference(&k.ran).cloned().collect();
        assert!(missing.is_empty(), "commands no step ran: {missing:?}");
    });
}

/// The App `web`'s id in `project`.
fn k_app_id(k: &mut Kubenest, project: &str) -> String {
    k.json(&["apps", "get", "web", "--project", project])["id"]
        .as_str()
        .unwrap()
        .to_owned()
}
