// A TCP proxy in front of the API server, so the scenario can cut the browser's connections
// (the live stream among them) the way a network does, and restore them. Chromium's offline
// emulation leaves an open stream alone, so it cannot show a resume.
import net from "node:net";

export async function startProxy(target) {
  const { hostname, port } = new URL(target);
  const open = new Set();
  let down = false;
  const server = net.createServer((client) => {
    if (down) return client.destroy();
    const upstream = net.connect(Number(port), hostname);
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ]) {
      a.pipe(b);
      a.on("error", () => b.destroy());
      a.on("close", () => b.destroy());
    }
    open.add(client);
    open.add(upstream);
    client.on("close", () => open.delete(client));
    upstream.on("close", () => open.delete(upstream));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    /// Drops every connection and refuses new ones until `restore`.
    cut() {
      down = true;
      for (const socket of open) socket.destroy();
    },
    restore() {
      down = false;
    },
    close: () => server.close(),
  };
}
