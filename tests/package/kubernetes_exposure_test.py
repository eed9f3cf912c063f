#!/usr/bin/env python3
"""examples/kubernetes/ does not expose sentineld's HTTP API (no access control of its own)
beyond the node and Prometheus:
- every listen address sentineld is given (the ConfigMap's `listen`, the DaemonSet's --listen) is
  loopback or the pod's own IP (downward API status.podIP), never a wildcard address;
- no hostNetwork and no hostPort (either would put the API on the node's address);
- a NetworkPolicy in sentineld's namespace selects its pods, isolates their ingress, and admits
  only the metrics port, only from selected namespaces or pods (no ipBlock, no empty peer list).
Usage: kubernetes_exposure_test.py REPO_ROOT"""
import glob
import ipaddress
import os
import re
import sys

import yaml

errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


def host_of(listen):
    host = listen.rsplit(":", 1)[0]
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def main():
    root = sys.argv[1]
    docs = []
    for path in sorted(glob.glob(os.path.join(root, "examples/kubernetes/*.yaml"))):
        with open(path) as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    ds = by_kind["DaemonSet"][0]
    cm = by_kind["ConfigMap"][0]
    pod = ds["spec"]["template"]["spec"]
    c = [c for c in pod["containers"] if c["name"] == "sentineld"][0]
    env = {e["name"]: e for e in c.get("env", [])}

    listens = []
    for line in cm["data"]["sentineld.conf"].splitlines():
        m = re.match(r"\s*listen\s*=\s*(\S+)", line)
        if m:
            listens.append(("ConfigMap listen", m.group(1)))
    args = c.get("args", [])
    for i, a in enumerate(args):
        if a == "--listen" and i + 1 < len(args):
            listens.append(("DaemonSet --listen", args[i + 1]))
        elif a.startswith("--listen="):
            listens.append(("DaemonSet --listen", a.split("=", 1)[1]))
    check(listens, "sentineld is given no listen address (its default is loopback, but say it)")
    for where, listen in listens:
        host = host_of(listen)
        ref = re.fullmatch(r"\$\((\w+)\)", host)
        if ref:
            e = env.get(ref.group(1), {})
            field = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            check(field == "status.podIP",
                  "%s %s: $(%s) is not the pod IP (fieldRef status.podIP)" % (where, listen, ref.group(1)))
            continue
        try:
            ip = ipaddress.ip_address(host)
            check(ip.is_loopback, "%s %s: listens on %s, beyond the pod" % (where, listen, host))
        except ValueError:
            check(host == "localhost", "%s %s: %r is neither loopback nor the pod IP" % (where, listen, host))

    check(not pod.get("hostNetwork", False), "hostNetwork puts the API on the node's address")
    for p in c.get("ports", []):
        check("hostPort" not in p, "hostPort %s exposes port %s on the node" % (p.get("hostPort"), p["name"]))

    ns = ds["metadata"]["namespace"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    metrics = ports.get("metrics")
    policies = [p for p in by_kind.get("NetworkPolicy", [])
                if p["metadata"].get("namespace") == ns
                and p["spec"].get("podSelector", {}).get("matchLabels", {}).items() <= labels.items()]
    check(policies, "no NetworkPolicy selects sentineld's pods in namespace %s" % ns)
    for pol in policies:
        spec = pol["spec"]
        name = pol["metadata"]["name"]
        check("Ingress" in spec.get("policyTypes", []), "%s: ingress is not isolated" % name)
        for rule in spec.get("ingress", []):
            peers = rule.get("from")
            check(peers, "%s: an ingress rule admits every source" % name)
            for peer in peers or []:
                check("ipBlock" not in peer, "%s: an ipBlock peer (addresses are not identities)" % name)
                check(peer.get("namespaceSelector") or peer.get("podSelector"),
                      "%s: an empty peer admits everything" % name)
            rports = rule.get("ports")
            check(rports, "%s: an ingress rule admits every port" % name)
            for rp in rports or []:
                check(rp.get("port") in ("metrics", metrics),
                      "%s: admits port %r, not the metrics port" % (name, rp.get("port")))

    if errors:
        print("FAIL:\n  " + "\n  ".join(errors))
        sys.exit(1)
    print("PASS: %d listen address(es), %d NetworkPolicy" % (len(listens), len(policies)))


if __name__ == "__main__":
    main()
