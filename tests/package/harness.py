"""Shared by the operator-view tests: a real sentineld on a private socket and a free loopback
port, the simulator, a fake sysfs NIC tree, and HTTP helpers. Everything is cleaned up on exit."""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request


def free_port():
    """A TCP port that binds now (IPv4 and IPv6), for a server that cannot take port 0 and report
    (Prometheus, a rendezvous by MASTER_PORT). It is picked below the kernel's ephemeral range, where
    port 0 and every outgoing connection of the tests running beside this one take theirs."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    for _ in range(200):
        port = random.randrange(10000, max(low, 10001))
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        try:
            s.bind(("::", port))
            return port
        except OSError:
            pass
        finally:
            s.close()
    raise RuntimeError("no free TCP port below %d" % low)


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def fake_sysfs(root):
    """One ACTIVE 400 Gb/s RDMA port with a few PMA and driver counters (collector/nic/)."""
    port = os.path.join(root, "class/infiniband/mlx5_0/ports/1")
    for d in ("counters", "hw_counters"):
        os.makedirs(os.path.join(port, d), exist_ok=True)
    files = {"state": "4: ACTIVE", "rate": "400 Gb/sec (4X NDR)", "link_layer": "InfiniBand",
             "counters/symbol_error": "0", "counters/port_xmit_wait": "100",
             "hw_counters/np_cnp_sent": "5", "hw_counters/out_of_sequence": "0"}
    for name, text in files.items():
        with open(os.path.join(port, name), "w") as f:
            f.write(text + "\n")
    return port


class Sentineld:
    def __init__(self, binary, workdir, extra=(), stderr=None):
        self.dir = workdir
        self.socket = os.path.join(workdir, "s.sock")
        port_file = os.path.join(workdir, "port")
        self.log_path = os.path.join(workdir, "sentineld.log")
        self.log = stderr if stderr is not None else open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, "--socket", self.socket, "--listen", "127.0.0.1:0", "--port-file", port_file,
             *extra], stdout=self.log, stderr=self.log)
        deadline = time.time() + 10
        while time.time() < deadline:
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            if self.proc.poll() is not None:
                raise RuntimeError("sentineld exited %d: %s" % (self.proc.returncode, self.logs()))
            time.sleep(0.05)
        else:
            raise RuntimeError("sentineld did not write its port")
        self.port = int(open(port_file).read())
        self.addr = "127.0.0.1:%d" % self.port
        self.port_file = port_file

    def logs(self):
        try:
            return open(self.log_path).read()
        except OSError:
            return ""

    def json(self, path):
        return json.loads(http_get("http://%s%s" % (self.addr, path)))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class Prometheus:
    def __init__(self, binary, workdir, target, rule_files=()):
        self.port = free_port()
        cfg = os.path.join(workdir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n")
            if rule_files:
                f.write("rule_files:\n" + "".join("  - %s\n" % r for r in rule_files))
            f.write("scrape_configs:\n  - job_name: sentineld\n    static_configs:\n"
                    "      - targets: ['%s']\n" % target)
        self.log = open(os.path.join(workdir, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            [binary, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdout=self.log, stderr=self.log)

    def query(self, expr):
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (self.port, urllib.parse.urlencode({"query": expr}))
        try:
            return json.loads(http_get(url))
        except urllib.error.HTTPError as e:  # 400 for a bad expression: its body says why
            return json.loads(e.read().decode())

    def series(self, match):
        url = "http://127.0.0.1:%d/api/v1/series?%s" % (self.port, urllib.parse.urlencode({"match[]": match}))
        return json.loads(http_get(url))["data"]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(20)


def workdir(prefix):
    d = tempfile.mkdtemp(prefix=prefix)
    return d


def cleanup(d):
    shutil.rmtree(d, ignore_errors=True)


def start_job(argv, env):
    """The simulator in a process group of its own, so that stop_job reaches every rank: a rank
    left inside a collective whose peers are gone waits forever, as with real NCCL."""
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def stop_job(job):
    if job is None:
        return
    try:
        os.killpg(job.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    job.wait()
