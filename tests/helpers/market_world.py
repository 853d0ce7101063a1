"""market_world.py - what the Python tests share: named checks printed as cmocka
prints them (tests/run.sh counts the summary lines), and a private world: a
redis-server and a market-server on free loopback ports, the demo world seeded,
player and admin tokens from market-seed.
"""
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER = os.environ.get("MARKET_SERVER_BIN", os.path.join(ROOT, "bin", "market-server"))
SEED = os.environ.get("MARKET_SEED_BIN", os.path.join(ROOT, "bin", "market-seed"))


class Checks:
    """Named checks, each passed or failed, and cmocka's summary lines at the end."""

    def __init__(self):
        self.passed, self.failed = [], []

    def run(self, name, fn):
        """Runs fn; an exception fails the check. Returns fn's result, or None."""
        print(f"[ RUN      ] {name}", flush=True)
        try:
            out = fn()
        except Exception as e:  # a check's failure, reported and counted
            print(f"  {type(e).__name__}: {e}")
            print(f"[  FAILED  ] {name}", flush=True)
            self.failed.append(name)
            return None
        print(f"[       OK ] {name}", flush=True)
        self.passed.append(name)
        return out

    def fail(self, name, why):
        print(f"  {why}")
        print(f"[  FAILED  ] {name}", flush=True)
        self.failed.append(name)

    def summary(self):
        """Prints the summary; returns the exit status (0: all passed)."""
        print(f"[==========] {len(self.passed) + len(self.failed)} test(s) run.")
        print(f"[  PASSED  ] {len(self.passed)} test(s).")
        if self.failed:
            print(f"[  FAILED  ] {len(self.failed)} test(s), listed below:")
            for name in self.failed:
                print(f"[  FAILED  ] {name}")
        return 1 if self.failed else 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class World:
    """A redis-server and a market-server (extra flags: server_args) over the demo world.

    secret None serves with --no-auth. sale, a market-seed --sale spec, creates a
    flash sale after the seed; auction, a market-seed --auction spec, an auction. quick_timeouts False keeps the server's own Redis
    and lock wait timeouts (make run's), instead of short ones for the tests."""

    def __init__(self, secret, admin_secret=None, server_args=(), sale=None, quick_timeouts=True,
                 auction=None):
        self.secret, self.admin_secret = secret, admin_secret
        self.sale, self.quick_timeouts, self.auction = sale, quick_timeouts, auction
        self.dir = tempfile.mkdtemp(prefix="market-world.")
        self.redis_port, self.http_port = free_port(), free_port()
        self.server, self.log = None, None
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{self.redis_port}/0"
        try:
            self._start(server_args)
        except Exception:
            self.close()
            raise

    def _start(self, server_args):
        for _ in range(100):
            if self.redis_cli("ping") == "PONG":
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("redis-server did not start")
        subprocess.run([SEED, "--redis", self.url, "--reset", os.path.join(ROOT, "fixtures", "demo.json")],
                       check=True, stdout=subprocess.DEVNULL)
        if self.sale:
            subprocess.run([SEED, "--redis", self.url, "--sale", self.sale], check=True,
                           stdout=subprocess.DEVNULL)
        if self.auction:
            subprocess.run([SEED, "--redis", self.url, "--auction", self.auction], check=True,
                           stdout=subprocess.DEVNULL)
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        args = [SERVER, "--listen", f"127.0.0.1:{self.http_port}", "--redis", self.url,
                "--log-level", "warn", "--web-dir", os.path.join(ROOT, "web")]
        args += ["--auth-secret", self.secret] if self.secret is not None else ["--no-auth"]
        if self.quick_timeouts:
            args += ["--redis-timeout-ms", "300", "--acquire-timeout-ms", "500"]
        if self.admin_secret:
            args += ["--admin-secret", self.admin_secret]
        self.server = subprocess.Popen(args + list(server_args), stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                if self.request("GET", "/healthz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("market-server did not start")

    def redis_cli(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.redis_port)] + list(args),
                              capture_output=True, text=True).stdout.strip()

    def token(self, player, realm=None):
        args = [SEED, "--auth-secret", self.secret] + (["--realm", realm] if realm else []) + \
               ["--print-token", player]
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()

    def admin_token(self):
        return subprocess.run([SEED, "--admin-secret", self.admin_secret, "--print-admin-token"],
                              check=True, capture_output=True, text=True).stdout.strip()

    def request(self, method, target, body=None, headers=None):
        """Returns (status, headers with lower-case names, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=10)
        try:
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            conn.request(method, target, body=data, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def server_log(self):
        try:
            with open(os.path.join(self.dir, "server.log"), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop_redis(self):
        self.redis.terminate()
        self.redis.wait(10)

    def close(self):
        if self.server:
            self.server.terminate()
            self.server.wait(10)
        if self.redis.poll() is None:
            self.redis.terminate()
            self.redis.wait(10)
        if self.log:
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
