#!/usr/bin/env python3
"""examples/kubernetes/: every manifest parses, and its names, ports and paths agree with the
binaries' real flags and defaults and with each other:
- every sentineld flag in the DaemonSet args and every key of the ConfigMap's sentineld.conf is a
  flag `sentineld --help` lists; the config really starts the real sentineld (its expectation,
  durations and group are validated at startup), and /healthz (the probes' path) answers;
- the container port is the port of `listen`, the PodMonitor scrapes that port by name and
  selects the DaemonSet's pod labels;
- the socket lies in the hostPath directory the DaemonSet and the job pod both mount; the job's
  SENTINEL_SOCKET is that socket; sysfs-root is a read-only hostPath mount of /sys;
- the security settings (read-only root fs, non-root, resource limits) are present, and the job's
  runAsGroup is the gid the Containerfile gives the `sentinel` group named by allow-group;
- the job loads the plugin by NCCL's short name from the directory the init container copies the
  installed library into, and that library path is where the .deb installs it;
- every SENTINEL_* variable used is documented in README.md, every env var of the job is real;
- every path the Containerfile COPYs exists in the repository.
Usage: kubernetes_test.py REPO_ROOT SENTINELD"""
import glob
import grp
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import subprocess  # noqa: E402

errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


def main():
    root, sentineld = sys.argv[1:3]
    kdir = os.path.join(root, "examples/kubernetes")
    docs = []
    for path in sorted(glob.glob(os.path.join(kdir, "*.yaml"))):
        with open(path) as f:
            for d in yaml.safe_load_all(f):
                if d:
                    check("apiVersion" in d and "kind" in d and "name" in d.get("metadata", {}),
                          "%s: a document lacks apiVersion/kind/metadata.name" % path)
                    docs.append(d)
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    ds = by_kind["DaemonSet"][0]
    cm = by_kind["ConfigMap"][0]
    pm = by_kind["PodMonitor"][0]
    job = by_kind["Pod"][0]

    help_text = subprocess.run([sentineld, "--help"], capture_output=True, text=True, check=True).stdout
    flags = set(re.findall(r"--([a-z][a-z0-9-]*)", help_text))

    pod = ds["spec"]["template"]["spec"]
    c = [c for c in pod["containers"] if c["name"] == "sentineld"][0]
    for a in c.get("args", []):
        if a.startswith("--"):
            check(a[2:].split("=")[0] in flags, "DaemonSet arg %s is not a sentineld flag" % a)
    conf_mount = [m for m in c["volumeMounts"] if m["name"] == "config"][0]["mountPath"]
    check(c["args"][c["args"].index("--config") + 1] == conf_mount + "/sentineld.conf",
          "--config does not point into the ConfigMap mount")
    check(cm["metadata"]["name"] == [v for v in pod["volumes"] if v["name"] == "config"][0]["configMap"]["name"],
          "the DaemonSet mounts another ConfigMap")
    conf_text = cm["data"]["sentineld.conf"]
    conf = {}
    for line in conf_text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        k, v = [x.strip() for x in line.split("=", 1)]
        conf[k] = v
        check(k in flags, "ConfigMap key %r is not a sentineld flag" % k)

    # Ports.
    port_names = {p["name"]: p["containerPort"] for p in c["ports"]}
    listen_port = int(conf["listen"].rsplit(":", 1)[1])
    check(port_names.get("metrics") == listen_port, "containerPort != listen port %d" % listen_port)
    check(re.search(r"default 127\.0\.0\.1:%d" % listen_port, help_text) is not None,
          "the manifests' port %d is not sentineld's default port" % listen_port)
    for probe in ("livenessProbe", "readinessProbe"):
        check(c[probe]["httpGet"]["port"] in port_names, "%s port is not a named container port" % probe)
    ep = pm["spec"]["podMetricsEndpoints"][0]
    check(ep["port"] in port_names and ep["path"] == "/metrics", "PodMonitor endpoint does not match")
    check(pm["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items(),
          "PodMonitor selector does not select the DaemonSet's pods")
    check(ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items(),
          "DaemonSet selector does not match its template")
    check(pm["metadata"]["namespace"] == ds["metadata"]["namespace"] == cm["metadata"]["namespace"],
          "namespaces differ")

    # Paths: socket dir, sysfs.
    def host_mounts(spec, container):
        vols = {v["name"]: v for v in spec["volumes"]}
        out = {}
        for m in container["volumeMounts"]:
            v = vols[m["name"]]
            out[m["mountPath"]] = (v.get("hostPath", {}).get("path"), m.get("readOnly", False), v)
        return out
    dmounts = host_mounts(pod, c)
    sock_dir = os.path.dirname(conf["socket"])
    check(sock_dir in dmounts and dmounts[sock_dir][0], "socket dir %s is not a hostPath mount" % sock_dir)
    check(conf["sysfs-root"] in dmounts and dmounts[conf["sysfs-root"]][0] == "/sys"
          and dmounts[conf["sysfs-root"]][1], "sysfs-root is not a read-only hostPath /sys mount")
    # The late-rank evidence: the host's pids and /proc (hostPID), the host's cgroup tree under the
    # read-only /sys mount, NVML through the NVIDIA runtime's utility capability.
    check(pod.get("hostPID") is True, "the DaemonSet lacks hostPID (the ranks' /proc)")
    check(conf.get("proc-root", "/proc") == "/proc", "proc-root is not the host PID namespace's /proc")
    cg = conf.get("cgroup-root", "")
    check(cg.startswith(conf["sysfs-root"] + "/") and cg.endswith("/fs/cgroup"),
          "cgroup-root %r is not the host's /sys/fs/cgroup under the sysfs mount" % cg)
    denv = {e["name"]: e.get("value") for e in c.get("env", [])}
    check(denv.get("NVIDIA_DRIVER_CAPABILITIES") == "utility",
          "sentineld's container does not ask for NVML (NVIDIA_DRIVER_CAPABILITIES=utility)")
    check(not c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu"),
          "sentineld must not take a GPU from the jobs")
    jpod = job["spec"]
    jc = jpod["containers"][0]
    jmounts = host_mounts(jpod, jc)
    env = {e["name"]: e.get("value") for e in jc["env"]}
    check(env.get("SENTINEL_SOCKET") == conf["socket"], "job SENTINEL_SOCKET != sentineld socket")
    jsock_dir = os.path.dirname(env.get("SENTINEL_SOCKET", ""))
    check(jsock_dir in jmounts and jmounts[jsock_dir][0] == dmounts[sock_dir][0],
          "the job does not mount sentineld's hostPath socket directory")
    check(env.get("NCCL_PROFILER_PLUGIN") == "sentinel", "the job does not use the short plugin name")
    libdir = env.get("LD_LIBRARY_PATH", "")
    check(libdir in jmounts, "LD_LIBRARY_PATH is not a mounted directory")
    init = jpod["initContainers"][0]
    lib_src = init["command"][1]
    check(init["command"][2].rstrip("/") == libdir and any(
        m["mountPath"] == libdir for m in init["volumeMounts"]), "the init container copies elsewhere")
    check(re.fullmatch(r"/usr/lib/[a-z0-9_]+-linux-gnu/libnccl-profiler-sentinel\.so", lib_src) is not None,
          "the library path %s is not where the .deb installs it" % lib_src)
    for e in jc["env"]:
        if e["name"].startswith("SENTINEL_"):
            check("`%s`" % e["name"] in open(os.path.join(root, "README.md")).read(),
                  "%s is not in README's variable table" % e["name"])

    # Security and resources.
    sc = c["securityContext"]
    check(sc.get("readOnlyRootFilesystem") is True, "root fs not read-only")
    check(sc.get("allowPrivilegeEscalation") is False, "privilege escalation allowed")
    check(pod["securityContext"].get("runAsNonRoot") is True and pod["securityContext"]["runAsUser"] != 0,
          "sentineld runs as root")
    check("limits" in c["resources"] and "memory" in c["resources"]["limits"], "no memory limit")
    containerfile = open(os.path.join(kdir, "Containerfile")).read()
    m = re.search(r"groupadd --system --gid (\d+) (\S+)", containerfile)
    check(m is not None, "the Containerfile creates no fixed-gid group")
    if m:
        check(m.group(2) == conf["allow-group"], "allow-group is not the Containerfile's group")
        check(int(m.group(1)) == jpod["securityContext"]["runAsGroup"] == pod["securityContext"]["runAsGroup"],
              "job runAsGroup / sentineld gid / Containerfile gid differ")
    check(re.search(r'ENTRYPOINT \["/usr/bin/sentineld"\]', containerfile) is not None,
          "the image entrypoint is not the installed sentineld")

    # Every COPY source of the Containerfile exists (build context = the repository root).
    for line in containerfile.splitlines():
        if line.startswith("COPY") and "--from=" not in line:
            for src in line.split()[1:-1]:
                check(os.path.exists(os.path.join(root, src)), "Containerfile copies missing %s" % src)

    # The config starts the real sentineld (flags, durations, expectation grammar, group). Only
    # what a test cannot have is replaced: the socket, the port and the group (absent here).
    work = harness.workdir("sentinel-k8s.")
    try:
        os.makedirs(os.path.join(work, "sys"))
        test_conf = dict(conf)
        test_conf.update({"socket": os.path.join(work, "s.sock"), "listen": "127.0.0.1:0",
                          "sysfs-root": os.path.join(work, "sys"),
                          "allow-group": grp.getgrgid(os.getgid()).gr_name})
        conf_path = os.path.join(work, "sentineld.conf")
        with open(conf_path, "w") as f:
            f.write("".join("%s = %s\n" % kv for kv in test_conf.items()))
        d = harness.Sentineld(sentineld, work, ["--config", conf_path])
        try:
            health = d.json(c["livenessProbe"]["httpGet"]["path"])
            check(health.get("status") == "ok", "probe path answered %r" % health)
            expect_file = os.path.join(work, "expect")
            check(os.path.exists(expect_file), "sentineld did not publish the node expectation")
        finally:
            d.stop()
    finally:
        harness.cleanup(work)

    if errors:
        print("FAIL:\n  " + "\n  ".join(errors))
        sys.exit(1)
    print("PASS: %d manifests, %d ConfigMap keys, flags/ports/paths consistent" % (len(docs), len(conf)))


if __name__ == "__main__":
    main()
