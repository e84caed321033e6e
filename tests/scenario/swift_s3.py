"""An all-in-one OpenStack Swift with its s3api middleware, on loopback,
for the archive store's test (t_execd_s3.py) and bench (bench/exec.py):
Debian 12's packages (swift-proxy, swift-account, swift-container,
swift-object, python3-swift; tools/deps.sh installs them), our own
configuration in a directory of the caller's, no service of the system's.

- one ring each for accounts, containers and objects: one replica, one
  device (a directory, mount_check off), built with swift-ring-builder;
- an account, a container and an object server and a proxy, each one
  process (workers = 0) on a free 127.0.0.1 port, run as root (user =
  root: the test runs as root, and the device directory is ours);
- the proxy's pipeline: s3api before tempauth (s3api checks every
  request's AWS Signature V4 against the key tempauth holds for the
  user: a wrong secret is 403 SignatureDoesNotMatch), and slo after it
  (s3api's multipart uploads are SLO manifests); no memcached: the cache
  filter is left out (tempauth's tokens are not used; S3 requests carry
  their own signature).

Swift reads swift.conf from swift_dir (every config here names ours), so
/etc/swift is neither read nor written.  Every process is stopped by its
PID (SIGTERM, then SIGKILL) by close(), which the caller's clean-up runs
on every way out."""

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time

ACCOUNT, USER = "sluice", "archiver"
REGION = "us-east-1"

SERVERS = ("account", "container", "object")


def _die_with_parent():
    """In the child: SIGTERM when the test dies without its clean-up
    (SIGKILL), so no server outlives it."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # SET_PDEATHSIG


class Unavailable(Exception):
    """Swift's programs or boto3 are not installed."""


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def _need():
    missing = [p for p in ["swift-ring-builder", "swift-proxy-server"] +
               ["swift-%s-server" % k for k in SERVERS]
               if shutil.which(p) is None]
    if missing:
        raise Unavailable("OpenStack Swift is not installed (%s; Debian's "
                          "swift-proxy, swift-account, swift-container, "
                          "swift-object)" % ", ".join(missing))
    try:
        import boto3  # noqa: F401
    except ImportError as e:
        raise Unavailable("boto3 (python3-boto3): %s" % e)


class SwiftS3:
    """Swift with s3api on 127.0.0.1 in directory top (made, and left for
    the caller's clean-up with its logs); .ep the S3 endpoint, .ak/.sk a
    key of the account's admin user, .client(secret) a boto3 client."""

    def __init__(self, top, log=print):
        _need()
        self.top = top
        self.procs = []
        self.logs = []
        self.nocache = self.nolog = None
        self.ak = "%s:%s" % (ACCOUNT, USER)
        self.sk = secrets.token_hex(20)
        etc = os.path.join(top, "etc")
        self.devices = os.path.join(top, "srv")
        for d in (etc, os.path.join(self.devices, "d1"),
                  os.path.join(top, "log")):
            os.makedirs(d, exist_ok=True)
        self.etc = etc
        ports = {k: _free_port() for k in SERVERS + ("proxy",)}
        # tempauth needs the cache filter's client in every request, not
        # a memcached: an S3 request is checked by its signature, no
        # token is cached.  The client's port is one held here, bound
        # and not listening: refused at once, and no one else's
        self.nocache = socket.socket()
        self.nocache.bind(("127.0.0.1", 0))
        self.nocache_port = self.nocache.getsockname()[1]
        # Swift's syslog: a UDP socket held here and never read (the
        # kernel drops what overflows, the sender never waits), not the
        # host's /dev/log; the log is read from each process's console
        # (-v) instead
        self.nolog = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.nolog.bind(("127.0.0.1", 0))
        self.nolog_port = self.nolog.getsockname()[1]
        self.port = ports["proxy"]
        self.ep = "http://127.0.0.1:%d" % self.port
        try:
            self._write(ports)
            for k in SERVERS + ("proxy",):
                self._start(k)
            self._wait(log)
        except BaseException:
            self.close()
            raise

    def _write(self, ports):
        with open(os.path.join(self.etc, "swift.conf"), "w") as f:
            f.write("[swift-hash]\nswift_hash_path_suffix = %s\n"
                    "swift_hash_path_prefix = %s\n\n"
                    "[storage-policy:0]\nname = gold\ndefault = yes\n" % (
                        secrets.token_hex(8), secrets.token_hex(8)))
        for k in SERVERS:
            b = os.path.join(self.etc, "%s.builder" % k)
            for args in (["create", "2", "1", "1"],
                         ["add", "r1z1-127.0.0.1:%d/d1" % ports[k], "1"],
                         ["rebalance"]):
                p = subprocess.run(["swift-ring-builder", b] + args,
                                   stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True,
                                   timeout=60)
                # rebalance answers 1 for "warnings" (one device)
                if p.returncode not in (0, 1) or not os.path.exists(b):
                    raise RuntimeError("swift-ring-builder %s %s: %s%s" % (
                        k, " ".join(args), p.stdout, p.stderr))
            if not os.path.exists(os.path.join(self.etc,
                                               "%s.ring.gz" % k)):
                raise RuntimeError("swift-ring-builder made no %s ring" % k)
        common = ("[DEFAULT]\nbind_ip = 127.0.0.1\nbind_port = %d\n"
                  "workers = 0\nuser = root\nswift_dir = %s\n"
                  "devices = %s\nmount_check = false\n"
                  "log_name = %s\nlog_level = INFO\n"
                  "log_udp_host = 127.0.0.1\nlog_udp_port = %d\n\n"
                  "[pipeline:main]\npipeline = %s\n\n")
        extra = {
            # the container's listing is updated while the object's PUT
            # or DELETE waits (no object-updater runs here to catch up
            # with a late one): the test lists right after a DELETE
            "object": "container_update_timeout = 30\n",
            "container": "", "account": ""}
        for k in SERVERS:
            with open(os.path.join(self.etc, "%s-server.conf" % k),
                      "w") as f:
                f.write(common % (ports[k], self.etc, self.devices, k,
                                  self.nolog_port, "%s-server" % k))
                f.write("[app:%s-server]\nuse = egg:swift#%s\n%s" % (
                    k, k, extra[k]))
        with open(os.path.join(self.etc, "proxy-server.conf"), "w") as f:
            f.write(common % (
                ports["proxy"], self.etc, self.devices, "proxy",
                self.nolog_port,
                "catch_errors gatekeeper proxy-logging cache listing_formats "
                "s3api tempauth copy slo dlo proxy-logging proxy-server"))
            f.write(
                "[app:proxy-server]\nuse = egg:swift#proxy\n"
                "account_autocreate = true\n\n"
                "[filter:tempauth]\nuse = egg:swift#tempauth\n"
                "user_%s_%s = %s .admin\n\n"
                "[filter:s3api]\nuse = egg:swift#s3api\nlocation = %s\n\n"
                "[filter:cache]\nuse = egg:swift#memcache\n"
                "memcache_servers = 127.0.0.1:%d\n\n"
                "[filter:catch_errors]\nuse = egg:swift#catch_errors\n\n"
                "[filter:gatekeeper]\nuse = egg:swift#gatekeeper\n\n"
                "[filter:proxy-logging]\nuse = egg:swift#proxy_logging\n\n"
                "[filter:listing_formats]\n"
                "use = egg:swift#listing_formats\n\n"
                "[filter:copy]\nuse = egg:swift#copy\n\n"
                "[filter:slo]\nuse = egg:swift#slo\n\n"
                "[filter:dlo]\nuse = egg:swift#dlo\n" % (
                    ACCOUNT, USER, self.sk, REGION, self.nocache_port))
        os.chmod(os.path.join(self.etc, "proxy-server.conf"), 0o600)

    def _start(self, k):
        lf = open(os.path.join(self.top, "log", "%s.log" % k), "w")
        self.logs.append(lf)
        # -v: the log on stderr too (there is no syslog here)
        self.procs.append((k, subprocess.Popen(
            ["swift-%s-server" % k, os.path.join(self.etc,
                                                "%s-server.conf" % k), "-v"],
            stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_die_with_parent)))

    def _wait(self, log):
        c = self.client()
        t0 = time.monotonic()
        while True:
            for k, p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError("swift-%s-server exited %d: %s" % (
                        k, p.returncode, self.tail(k)))
            try:
                # a signed S3 request the proxy and the account server
                # answer (account_autocreate)
                c.list_buckets()
                break
            except Exception:
                pass
            if time.monotonic() - t0 > 60:
                raise RuntimeError("Swift's proxy did not answer in 60 s: "
                                   "%s" % self.tail("proxy"))
            time.sleep(0.2)
        log("swift (s3api) up on %s in %.1f s" % (self.ep,
                                                 time.monotonic() - t0))

    def tail(self, k, n=2000):
        try:
            with open(os.path.join(self.top, "log", "%s.log" % k)) as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def client(self, secret=None):
        import boto3
        from botocore.config import Config
        kw = {"s3": {"addressing_style": "path"}}
        try:
            # botocore >= 1.36 adds CRC32 checksums in a chunked trailer
            # by default, which Swift 2.30's s3api does not take: only
            # when an operation needs one (Debian 12's botocore 1.29 has
            # no such option and sends none)
            cfg = Config(request_checksum_calculation="when_required",
                         response_checksum_validation="when_required", **kw)
        except TypeError:
            cfg = Config(**kw)
        return boto3.client("s3", endpoint_url=self.ep, region_name=REGION,
                            aws_access_key_id=self.ak,
                            aws_secret_access_key=secret or self.sk,
                            config=cfg)

    def close(self):
        for k, p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for k, p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        for f in self.logs:
            f.close()
        self.logs = []
        for sk in (self.nocache, self.nolog):
            if sk is not None:
                sk.close()
        self.nocache = self.nolog = None
