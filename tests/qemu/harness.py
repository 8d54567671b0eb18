#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The multi-NUMA QEMU test: sets up qemu and a Debian kernel (setup.sh), builds an initramfs with
# busybox, our programs and their libraries, boots a guest whose NUMA nodes and HMAT stand in for
# DRAM, CXL-attached DRAM and HBM, and reads one result line per guest check off the serial
# console. Exit status: 0 every check passed or skipped, 1 a step or a check failed, 77 qemu
# cannot be installed or started here (meson shows a skip). docs/qemu.md says more.
import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


@dataclasses.dataclass(frozen=True)
class Node:
    node: int
    stands_for: str
    mem_mib: int
    cpus: str | None  # "0-1", or None for a CPU-less node
    bandwidth_mib_s: int  # HMAT access bandwidth from node 0's CPUs (Linux shows MiB/s; higher is better)
    latency_ns: int  # HMAT access latency from node 0's CPUs (lower is better)


# The guest. The CPU-less nodes are numbered so that node order is not tier order: a topology
# that sorted by node id would fail. Node 0 is large enough for the runtime and the test programs.
NODES = [
    Node(0, "DRAM", 2048, "0-1", 20480, 100),
    Node(1, "CXL-attached DRAM", 512, None, 5120, 300),
    Node(2, "HBM", 512, None, 81920, 120),
]
# SLIT distances; QEMU wants every pair (one direction is mirrored).
DISTANCES = {(0, 1): 24, (0, 2): 14, (1, 2): 28}
CPUS = 2


def expectation():
    """node:MiB/s:ns per tier, fastest (highest bandwidth) first: what `cxltier topo` must find."""
    order = sorted(NODES, key=lambda n: (-n.bandwidth_mib_s, n.latency_ns))
    return ",".join(f"{n.node}:{n.bandwidth_mib_s}:{n.latency_ns}" for n in order)


def qemu_numa_args():
    args = ["-smp", str(CPUS), "-m", f"{sum(n.mem_mib for n in NODES)}M"]
    for n in NODES:
        args += ["-object", f"memory-backend-ram,id=m{n.node},size={n.mem_mib}M"]
    for n in NODES:
        cpus = f",cpus={n.cpus}" if n.cpus else ""
        # initiator=0 marks the CPU-less nodes' memory as reached from node 0's CPUs.
        args += ["-numa", f"node,nodeid={n.node},memdev=m{n.node}{cpus},initiator=0"]
    for (a, b), d in sorted(DISTANCES.items()):
        args += ["-numa", f"dist,src={a},dst={b},val={d}"]
    for n in NODES:
        # Every initiator/target pair: a missing entry is not an error for QEMU, it writes 0.
        lb = f"hmat-lb,initiator=0,target={n.node},hierarchy=memory"
        args += ["-numa", f"{lb},data-type=access-latency,latency={n.latency_ns}"]
        args += ["-numa", f"{lb},data-type=access-bandwidth,bandwidth={n.bandwidth_mib_s}M"]
    return args


def say(msg):
    print(f"qemu: {msg}", flush=True)


class StepFailed(Exception):
    def __init__(self, step, message):
        super().__init__(f"step '{step}' failed: {message}")
        self.step = step


# --- step 1: setup (packages and the kernel), cached between runs
def setup(cache, cxl):
    cmd = [os.path.join(HERE, "setup.sh")] + (["--cxl"] if cxl else []) + [cache]
    t0 = time.monotonic()
    rc = subprocess.run(cmd).returncode
    if rc == SKIP:
        say("SKIP: qemu cannot be installed here (see the setup.sh line above)")
        sys.exit(SKIP)
    if rc != 0:
        raise StepFailed("setup", f"{' '.join(cmd)} exited {rc}")
    try:
        out = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        say(f"SKIP: qemu-system-x86_64 cannot be started: {e}")
        sys.exit(SKIP)
    if out.returncode != 0:
        say(f"SKIP: qemu-system-x86_64 --version exited {out.returncode}: {out.stderr.strip()}")
        sys.exit(SKIP)
    kver = open(os.path.join(cache, "kernel", "current")).read().strip()
    kdir = os.path.join(cache, "kernel", kver)
    return kver, kdir, time.monotonic() - t0, out.stdout.splitlines()[0]


# --- step 2: the initramfs
def shared_libraries(path):
    """Absolute paths of the libraries the dynamic loader maps for `path`, the loader included."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True)
    if out.returncode != 0:
        if "not a dynamic executable" in out.stdout + out.stderr:
            return []
        raise StepFailed("initramfs", f"ldd {path}: {out.stderr.strip() or out.stdout.strip()}")
    libs = []
    for line in out.stdout.splitlines():
        if "not found" in line:
            raise StepFailed("initramfs", f"ldd {path}: {line.strip()}")
        m = re.search(r"=>\s*(/\S+)", line) or re.match(r"\s*(/\S+)\s+\(", line)
        if m:
            libs.append(m.group(1))
    return libs


def copy_at_same_path(root, path, strip=False):
    dest = root + path
    if os.path.exists(dest):
        return
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    # Our programs carry their debug information (debugoptimized builds): most of their size,
    # and the guest unpacks every byte of the initramfs under emulation.
    if strip and shutil.which("strip") and subprocess.run(
            ["strip", "--strip-debug", "-o", dest, os.path.realpath(path)], capture_output=True).returncode == 0:
        shutil.copymode(os.path.realpath(path), dest)
        return
    shutil.copy2(os.path.realpath(path), dest)


def build_initramfs(work, programs, files, checks, kver, kdir, cxl):
    t0 = time.monotonic()
    root = os.path.join(work, "guest-root")
    shutil.rmtree(root, ignore_errors=True)
    for d in ("bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "cxltq/bin", "etc"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    busybox = shutil.which("busybox") or "/bin/busybox"
    shutil.copy2(busybox, os.path.join(root, "bin/busybox"))
    for lib in shared_libraries(busybox):
        copy_at_same_path(root, lib)
    shutil.copy2(os.path.join(HERE, "guest", "init"), os.path.join(root, "init"))
    os.chmod(os.path.join(root, "init"), 0o755)
    shutil.copy2(os.path.join(HERE, "guest", "checks.sh"), os.path.join(root, "cxltq/checks.sh"))
    shutil.copy2(checks, os.path.join(root, "cxltq/checks.txt"))
    # Programs keep their build-tree path (so RUNPATHs such as $ORIGIN/../lib still resolve) and
    # get a link in /cxltq/bin, which is first on the guest's PATH.
    extra = []
    if cxl:
        extra = [p for p in ("/usr/bin/cxl", "/usr/bin/ndctl", "/usr/bin/daxctl") if os.path.exists(p)]
    for prog in list(programs) + extra:
        prog = os.path.abspath(prog)
        copy_at_same_path(root, prog, strip=True)
        for lib in shared_libraries(prog):
            copy_at_same_path(root, lib)
        link = os.path.join(root, "cxltq/bin", os.path.basename(prog))
        if not os.path.lexists(link):
            os.symlink(prog, link)
    for f in files:
        os.makedirs(os.path.join(root, "cxltq/files"), exist_ok=True)
        shutil.copy2(f, os.path.join(root, "cxltq/files", os.path.basename(f)))
    if cxl:
        src = os.path.join(kdir, "modroot", "lib", "modules", kver)
        shutil.copytree(src, os.path.join(root, "lib", "modules", kver), symlinks=True, dirs_exist_ok=True)
    initrd = os.path.join(work, "initrd.cpio")
    names = subprocess.run(["find", "."], cwd=root, capture_output=True, text=True, check=True).stdout
    names = "\n".join(sorted(names.split())) + "\n"
    with open(initrd, "wb") as f:
        p = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=names.encode(), stdout=f)
    if p.returncode != 0:
        raise StepFailed("initramfs", f"cpio exited {p.returncode}")
    return initrd, time.monotonic() - t0


# --- step 3: boot, with a timeout per boot, retried once when the guest did not finish
RESULT = re.compile(r"^CXLTQ (\S+) (PASS|FAIL|SKIP) ?(.*)$")


def parse_serial(text):
    results, begin, end = {}, None, None
    for raw in text.splitlines():
        line = raw.replace("\r", "").strip()
        # A kernel message can land in front of our line on the shared console; a check's own
        # output ("name| ...") cannot forge a result.
        i = line.find("CXLTQ")
        if i < 0 or "|" in line[:i]:
            continue
        line = line[i:]
        m = RESULT.match(line)
        if m:
            results[m.group(1)] = (m.group(2), m.group(3))
        elif line.startswith("CXLTQ-BEGIN "):
            begin = float(line.split()[1])
        elif line.startswith("CXLTQ-END "):
            end = float(line.split()[2])
    return results, begin, end


def boot(work, kdir, initrd, cmdline_extra, timeout, attempt, cxl, accel, interactive=False):
    log = os.path.join(work, f"serial-attempt{attempt}.log")
    cmd = ["qemu-system-x86_64",
           "-machine", "q35,hmat=on" + (",cxl=on" if cxl else ""),
           "-accel", accel, "-cpu", "max" if accel == "tcg" else "host"] + qemu_numa_args()
    if cxl:
        # QEMU 7.2's cxl-type3 has persistent memory only (memdev=, no volatile-memdev). RAM
        # backends: nothing on disk, and empty labels (LSA) at every boot. The second root port
        # stays empty on purpose: with a single one the onlined memory read back zeros (every
        # byte of every page, measured here); most likely Linux then treats the host bridge as
        # pass-through and leaves its decoder unprogrammed, which QEMU 7.2 does not route.
        cmd += ["-object", "memory-backend-ram,id=cxl-mem0,size=256M",
                "-object", "memory-backend-ram,id=cxl-lsa0,size=256M",
                "-device", "pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1",
                "-device", "cxl-rp,port=0,bus=cxl.1,id=root_port13,chassis=0,slot=2",
                "-device", "cxl-rp,port=1,bus=cxl.1,id=root_port14,chassis=0,slot=3",
                "-device", "cxl-type3,bus=root_port13,memdev=cxl-mem0,lsa=cxl-lsa0,id=cxl-pmem0",
                "-M", "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G"]
    cmdline = ["console=ttyS0", "panic=-1", "loglevel=4",
               f"cxltq_expect={expectation()}",
               f"cxltq_cpu_nodes={','.join(str(n.node) for n in NODES if n.cpus)}"] + cmdline_extra
    # The uncompressed kernel boots through its PVH entry, 6 s faster under TCG (setup.sh).
    kernel = os.path.join(kdir, "vmlinux")
    if not os.path.exists(kernel):
        kernel = os.path.join(kdir, "vmlinuz")
    cmd += ["-kernel", kernel, "-initrd", initrd, "-append", " ".join(cmdline),
            "-nographic", "-no-reboot", "-nic", "none"]
    with open(os.path.join(work, "qemu-command.txt"), "w") as f:
        f.write(" ".join(f"'{c}'" if " " in c else c for c in cmd) + "\n")
    if interactive:
        return subprocess.run(cmd).returncode, None, 0.0, False
    t0 = time.monotonic()
    timed_out = False
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            rc = proc.wait()
    return rc, log, time.monotonic() - t0, timed_out


def check_names(checks, only):
    names = []
    with open(checks) as f:
        for line in f:
            w = line.split()
            if w and not w[0].startswith("#") and (not only or w[0] in only):
                names.append(w[0])
    return names


def keep_log(log, build_root, name):
    logdir = os.path.join(build_root, "meson-logs")
    os.makedirs(logdir, exist_ok=True)
    kept = os.path.join(logdir, name)
    shutil.copy2(log, kept)
    return kept


ANSI = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z]|[A-Za-z])")


def tail(path, n):
    """The last n lines of a serial log, without the terminal control sequences of the firmware."""
    with open(path, "rb") as f:
        text = ANSI.sub("", f.read().decode("utf-8", "replace").replace("\r", ""))
    return text.splitlines()[-n:]


def main():
    ap = argparse.ArgumentParser(description="Boot the multi-NUMA QEMU guest and run the checks of "
                                 "tests/qemu/checks.txt in it (docs/qemu.md). Exit 0 pass, 1 fail, "
                                 "77 qemu cannot be installed or started here.")
    ap.add_argument("--build-root", required=True, help="the meson build directory")
    ap.add_argument("--program", action="append", default=[],
                    help="a program to copy into the guest with its libraries (repeat)")
    ap.add_argument("--file", action="append", default=[],
                    help="a data file (a config, a trace) to copy into the guest as /cxltq/files/NAME (repeat)")
    ap.add_argument("--checks", default=os.path.join(HERE, "checks.txt"), help="the check list (default checks.txt)")
    ap.add_argument("--only", default="", help="comma-separated check names to run")
    ap.add_argument("--cache", default=os.environ.get("CXLT_QEMU_CACHE", ""),
                    help="setup cache (default: setup.sh's)")
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("CXLT_QEMU_TIMEOUT", 90)),
                    help="seconds per boot (default 90)")
    ap.add_argument("--check-timeout", type=int, default=60, help="seconds per check inside the guest")
    ap.add_argument("--attempts", type=int, default=2, help="boots tried when one does not finish")
    ap.add_argument("--accel", default=os.environ.get("CXLT_QEMU_ACCEL", "tcg"), help="tcg (default) or kvm")
    ap.add_argument("--cxl", action="store_true", help="add a CXL Type-3 device (the optional CXL test)")
    ap.add_argument("--append", default="", help="more words for the guest kernel's command line")
    ap.add_argument("--name", default="qemu", help="names the work folder and kept logs")
    ap.add_argument("--shell", action="store_true",
                    help="boot interactively: run the checks, then a shell on the console (exit it to power off)")
    a = ap.parse_args()

    build_root = os.path.abspath(a.build_root)
    # Relative program paths: from the working directory, else from the build root (meson).
    a.program = [os.path.abspath(p) if os.path.exists(p) else os.path.join(build_root, p) for p in a.program]
    work = os.path.join(build_root, "tests", "qemu", "run-" + a.name)
    os.makedirs(work, exist_ok=True)
    cache = a.cache
    if not cache:
        cache = "/var/cache/cxltier-qemu" if os.geteuid() == 0 else os.path.join(
            os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "cxltier-qemu")
    only = [s for s in a.only.split(",") if s]
    expected = check_names(a.checks, only)
    t_start = time.monotonic()
    step = "setup"
    try:
        kver, kdir, t_setup, qver = setup(cache, a.cxl)
        say(f"setup {t_setup:.1f} s: {qver}, guest kernel {kver} (cache {cache})")
        step = "initramfs"
        initrd, t_init = build_initramfs(work, a.program, a.file, a.checks, kver, kdir, a.cxl)
        say(f"initramfs {t_init:.1f} s: {os.path.getsize(initrd) / 2**20:.1f} MiB, "
            f"{len(a.program)} program(s), {len(expected)} check(s)")
        extra = [f"cxltq_timeout={a.check_timeout}"] + a.append.split()
        if only:
            extra.append("cxltq_only=" + ",".join(only))
        if a.cxl:
            extra.append("cxltq_cxl=1")
        if a.shell:
            extra.append("cxltq_shell=1")
            boot(work, kdir, initrd, extra, 0, 0, a.cxl, a.accel, interactive=True)
            return 0
        step = "boot"
        results = None
        for attempt in range(1, a.attempts + 1):
            rc, log, wall, timed_out = boot(work, kdir, initrd, extra, a.timeout, attempt, a.cxl, a.accel)
            text = open(log, "rb").read().decode("utf-8", "replace")
            results, begin, end = parse_serial(text)
            finished = end is not None and not timed_out
            how = (f"timed out after {a.timeout:.0f} s" if timed_out else f"qemu exit {rc}")
            say(f"boot {attempt}/{a.attempts}: {wall:.1f} s wall, {how}, guest /init at "
                f"{begin if begin is not None else '-'} s, done at {end if end is not None else '-'} s (uptime)")
            if finished:
                break
            kept = keep_log(log, build_root, f"{a.name}-serial-attempt{attempt}.log")
            why = how if timed_out else "the guest powered off before CXLTQ-END" if begin else "/init never started"
            say(f"boot {attempt} did not finish ({why}); serial log kept: {kept}")
            for line in tail(log, 25):
                print(f"  serial| {line}")
        else:
            raise StepFailed("boot", f"no boot of {a.attempts} finished the checks")

        step = "checks"
        failed = []
        for name in expected:
            status, detail = results.get(name, ("FAIL", "no result line from the guest"))
            print(f"CXLTQ {name} {status} {detail}", flush=True)
            if status == "FAIL":
                failed.append(name)
        for name in results:
            if name not in expected:
                print(f"CXLTQ {name} FAIL not listed in {a.checks}")
                failed.append(name)
        counts = {s: sum(1 for n in expected if results.get(n, ("FAIL",))[0] == s) for s in ("PASS", "SKIP", "FAIL")}
        say(f"{counts['PASS']} passed, {counts['SKIP']} skipped, {counts['FAIL']} failed; "
            f"total {time.monotonic() - t_start:.1f} s; serial log {log}")
        if failed:
            kept = keep_log(log, build_root, f"{a.name}-serial.log")
            for name in failed:
                for line in text.replace("\r", "").splitlines():
                    if line.startswith(f"{name}|"):
                        print(f"  {line}")
            raise StepFailed("checks", f"{', '.join(failed)} failed in the guest; serial log kept: {kept}")
        return 0
    except StepFailed as e:
        say(f"FAILED: {e}")
        return 1
    except Exception as e:  # noqa: BLE001 - any other error is a failure of the step, named
        say(f"FAILED: step '{step}' failed: {type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
