# SPDX-License-Identifier: Apache-2.0
# The check kinds of the guest (sourced by /init; busybox sh). A line of checks.txt is
#   NAME KIND ARGS...
# and run_check NAME KIND ARGS... prints the check's output prefixed with "NAME| " and then
# exactly one line "CXLTQ NAME PASS|FAIL|SKIP detail". Kinds:
#   sysfs                          the kernel's HMAT view (access0 initiators) equals cxltq_expect
#   cli SUB VERIFY ARGS...         `cxltier ARGS...`; SKIP "command not built yet" when
#                                  `cxltier --help` lists no subcommand SUB; exit status 0 and
#                                  (VERIFY != -) `cxltq-guest VERIFY <stdout file> [cxltq_expect]`
#   exe PROGRAM ARGS...            PROGRAM's exit status: 0 PASS, 77 SKIP, else FAIL; its last
#                                  output line is the detail
#   gtest PROGRAM ARGS...          a GoogleTest program: PASS when it exits 0, ran at least one
#                                  test and skipped none (in the guest the multi-node paths must
#                                  run; select the tests with --gtest_filter=...)
#   cxl-online                     (CXL guest only) brings the emulated CXL Type-3 memory online
#                                  as a NUMA node: cxl create-region, ndctl create-namespace
#                                  (devdax), daxctl reconfigure-device --mode=system-ram; the new
#                                  node's number goes to /tmp/cxl_node for later checks

result() {  # result NAME STATUS DETAIL...
  n=$1 s=$2; shift 2
  echo "CXLTQ $n $s $(echo "$*" | tr -d '\r' | tr '\n' ' ')"
}

# run_capture NAME PROGRAM ARGS...: stdout to /tmp/NAME.out, stderr to /tmp/NAME.err, both shown
# on the console; sets rc. A check that runs past cxltq_timeout seconds is killed.
run_capture() {
  n=$1; shift
  timeout "${cxltq_timeout:-60}" "$@" > "/tmp/$n.out" 2> "/tmp/$n.err"
  rc=$?
  sed "s/^/$n| /" "/tmp/$n.out"
  sed "s/^/$n|err| /" "/tmp/$n.err"
  if [ $rc -eq 143 ] || [ $rc -eq 137 ]; then timed_out=1; else timed_out=0; fi
}

last_line() { grep -v '^[[:space:]]*$' "$1" | tail -n 1; }

check_sysfs() {
  n=$1 bad="" seen=""
  for t in $(echo "$cxltq_expect" | tr ',' ' '); do
    node=${t%%:*}; rest=${t#*:}; bw=${rest%%:*}; lat=${rest#*:}
    d=/sys/devices/system/node/node$node/access0/initiators
    for f in read_bandwidth write_bandwidth read_latency write_latency; do
      case $f in *bandwidth) want=$bw ;; *) want=$lat ;; esac
      got=$(cat "$d/$f" 2>/dev/null)
      echo "$n| node$node $f = ${got:-missing} (want $want)"
      [ "$got" = "$want" ] || bad="$bad node$node/$f=${got:-missing}(want $want)"
    done
    seen="$seen node$node:${bw}MiB/s:${lat}ns"
  done
  has_cpu=$(cat /sys/devices/system/node/has_cpu)
  [ "$has_cpu" = "${cxltq_cpu_nodes:-0}" ] || bad="$bad has_cpu=$has_cpu(want ${cxltq_cpu_nodes:-0})"
  if [ -z "$cxltq_expect" ]; then result "$n" FAIL "no cxltq_expect on the kernel command line"
  elif [ -n "$bad" ]; then result "$n" FAIL "$bad"
  else result "$n" PASS "HMAT from CPU node(s) $has_cpu:$seen"; fi
}

have_subcommand() {  # have_subcommand SUB: 0 when `cxltier --help` lists it
  if [ ! -f /tmp/cxltier-help.txt ]; then
    cxltier --help > /tmp/cxltier-help.txt 2>&1
    echo $? > /tmp/cxltier-help.rc
  fi
  grep -qE "^ +$1( |\$)" /tmp/cxltier-help.txt
}

check_cli() {
  n=$1 sub=$2 verify=$3; shift 3
  if ! command -v cxltier >/dev/null; then result "$n" FAIL "cxltier is not in the initramfs"; return; fi
  if ! have_subcommand "$sub"; then
    if [ "$(cat /tmp/cxltier-help.rc)" != 0 ]; then
      sed "s/^/$n|help| /" /tmp/cxltier-help.txt
      result "$n" FAIL "cxltier --help failed in the guest: $(last_line /tmp/cxltier-help.txt)"
    else
      result "$n" SKIP "command not built yet (cxltier --help lists no '$sub')"
    fi
    return
  fi
  run_capture "$n" cxltier "$@"
  if [ $timed_out = 1 ]; then result "$n" FAIL "cxltier $* timed out after ${cxltq_timeout:-60} s"; return; fi
  if [ $rc -ne 0 ]; then result "$n" FAIL "cxltier $* exited $rc: $(last_line /tmp/$n.err)"; return; fi
  if [ "$verify" = - ]; then result "$n" PASS "cxltier $* exited 0"; return; fi
  case $verify in
    verify-topo) set -- "/tmp/$n.out" "$cxltq_expect" ;;
    verify-topo-cxl) set -- "/tmp/$n.out" "$(cat /tmp/cxl_node 2>/dev/null)" ;;
    *) set -- "/tmp/$n.out" ;;
  esac
  cxltq-guest "$verify" "$@" > "/tmp/$n.verify" 2>&1
  vrc=$?
  sed "s/^/$n|verify| /" "/tmp/$n.verify"
  case $vrc in
    0) result "$n" PASS "$(last_line /tmp/$n.verify)" ;;
    *) result "$n" FAIL "$(last_line /tmp/$n.verify)" ;;
  esac
}

check_exe() {
  n=$1 prog=$2; shift 2
  if ! command -v "$prog" >/dev/null; then result "$n" FAIL "$prog is not in the initramfs"; return; fi
  run_capture "$n" "$prog" "$@"
  detail=$(last_line "/tmp/$n.out")
  if [ $timed_out = 1 ]; then result "$n" FAIL "$prog timed out after ${cxltq_timeout:-60} s; $detail"
  elif [ $rc -eq 0 ]; then result "$n" PASS "$detail"
  elif [ $rc -eq 77 ]; then result "$n" SKIP "$detail"
  else result "$n" FAIL "$prog exited $rc: ${detail:-$(last_line /tmp/$n.err)}"; fi
}

gtest_names() {  # gtest_names FAILED|SKIPPED FILE: up to 3 test names, once each
  sed -n "s/^\\[  $1 *\\] \\([A-Za-z][^ ]*\\).*/\\1/p" "$2" | sort -u | head -n 3 | tr '\n' ' '
}

check_gtest() {
  n=$1 prog=$2; shift 2
  if ! command -v "$prog" >/dev/null; then result "$n" FAIL "$prog is not in the initramfs"; return; fi
  run_capture "$n" "$prog" --gtest_color=no "$@"
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "/tmp/$n.out")
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "/tmp/$n.out")
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "/tmp/$n.out")
  if [ $timed_out = 1 ]; then result "$n" FAIL "$prog timed out after ${cxltq_timeout:-60} s"
  elif [ $rc -ne 0 ]; then result "$n" FAIL "$prog exited $rc, ${failed:-?} failed: $(gtest_names FAILED "/tmp/$n.out")"
  elif [ -n "$skipped" ]; then result "$n" FAIL "$skipped test(s) skipped in the multi-NUMA guest: $(gtest_names SKIPPED "/tmp/$n.out")"
  elif [ -z "$passed" ] || [ "$passed" -eq 0 ]; then result "$n" FAIL "$prog ran no test (check the --gtest_filter)"
  else result "$n" PASS "$passed test(s) passed"; fi
}

check_cxl_online() {
  n=$1
  before=$(cat /sys/devices/system/node/has_memory)
  # busybox modprobe resolves dependencies from modules.dep (setup.sh ran depmod for us).
  for m in cxl_acpi cxl_pci cxl_mem cxl_pmem nd_pmem dax_pmem device_dax kmem; do
    modprobe "$m" 2>&1 | sed "s/^/$n|modprobe $m| /"
  done
  # The CXL ports and the memdev are probed asynchronously after the modules load.
  i=0
  while [ ! -e /sys/bus/cxl/devices/mem0 ] || [ ! -e /sys/bus/cxl/devices/decoder0.0 ]; do
    i=$((i + 1)); [ $i -gt 100 ] && break; sleep 0.1
  done
  echo "$n| cxl devices: $(ls /sys/bus/cxl/devices 2>/dev/null | tr '\n' ' ')"
  if [ ! -e /sys/bus/cxl/devices/mem0 ]; then result "$n" FAIL "no CXL memdev (mem0) after loading the cxl modules"; return; fi
  step() {  # step WHAT COMMAND...: runs it, shows its output, fails the check when it fails
    what=$1; shift
    timeout "${cxltq_timeout:-60}" "$@" > "/tmp/$n.step" 2>&1; src=$?
    sed "s/^/$n|$what| /" "/tmp/$n.step"
    [ $src -eq 0 ] || { result "$n" FAIL "$what exited $src: $(last_line /tmp/$n.step)"; return 1; }
  }
  # QEMU 7.2's cxl-type3 has persistent memory only: a pmem region, a devdax namespace on it,
  # and the dax device handed to the kernel as system RAM (the kmem driver).
  step create-region cxl create-region -m -d decoder0.0 -w 1 -t pmem mem0 || return
  step create-namespace ndctl create-namespace -m devdax -r region0 || return
  dax=$(ls /sys/bus/dax/devices 2>/dev/null | head -n 1)
  [ -n "$dax" ] || { result "$n" FAIL "no dax device after ndctl create-namespace"; return; }
  step system-ram daxctl reconfigure-device --mode=system-ram --force "$dax" || return
  after=$(cat /sys/devices/system/node/has_memory)
  node=$(cat "/sys/bus/dax/devices/$dax/target_node" 2>/dev/null)
  echo "$n| has_memory $before -> $after; $dax target_node $node"
  if [ -z "$node" ] || [ ! -d "/sys/devices/system/node/node$node" ]; then
    result "$n" FAIL "$dax's target node '$node' did not come online (has_memory $after)"; return
  fi
  echo "$node" > /tmp/cxl_node
  kb=$(sed -n 's/.*MemTotal: *\([0-9]*\) kB/\1/p' "/sys/devices/system/node/node$node/meminfo")
  result "$n" PASS "$dax online as NUMA node $node ($((kb / 1024)) MiB system RAM); has_memory $after"
}

run_check() {
  n=$1 kind=$2; shift 2
  case $kind in
    sysfs) check_sysfs "$n" ;;
    cli) check_cli "$n" "$@" ;;
    exe) check_exe "$n" "$@" ;;
    gtest) check_gtest "$n" "$@" ;;
    cxl-online) check_cxl_online "$n" ;;
    *) result "$n" FAIL "unknown check kind '$kind' in checks.txt" ;;
  esac
}
