// kubectl on a workload cluster, as an operator changing things behind kubenest's back.
import { execFileSync } from "node:child_process";

export function kubectl(cluster, ...args) {
  const kubeconfig = process.env[`KUBENEST_KUBECONFIG_${cluster.toUpperCase()}`];
  if (!kubeconfig) throw new Error(`no kubeconfig for ${cluster}`);
  return execFileSync(process.env.KUBENEST_KUBECTL ?? "kubectl", ["--kubeconfig", kubeconfig, ...args], { encoding: "utf8" });
}
