#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the libFuzzer targets for a bounded time each (the CI's fuzz stage; docs/reliability.md).
#   tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]      (default: every target)
# BUILD_DIR is a clang build configured with -Dfuzz=true (see docs/reliability.md). Two targets
# run at a time (one per core). Each starts from its seed corpora (tests/data, examples/,
# tests/fuzz/seeds/<target>) and its regression inputs, and keeps what it finds in
# tests/fuzz/corpus-work/<target>/ (ignored by git; kept between runs on one machine). A crash
# leaves its input as tests/fuzz/corpus-work/artifacts/<target>-crash-*: after the fix, commit
# it under tests/fuzz/regressions/<target>/ so that the normal suite replays it.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$1"
seconds="$2"
shift 2
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(trace_reader config units score_store topology cli_args run_config file_kinds)
work="$root/tests/fuzz/corpus-work"
mkdir -p "$work/artifacts" "$work/logs"

# target -> seed directories and the longest input worth mutating (bytes)
seeds_of() {
  case "$1" in
    trace_reader) echo "$root/tests/data/traces" ;;
    config) echo "$root/tests/fuzz/seeds/config $root/examples" ;;
    units) echo "$root/tests/fuzz/seeds/units" ;;
    score_store) echo "$root/tests/fuzz/seeds/score_store" ;;
    topology) echo "$root/tests/data/topologies" ;;
    cli_args) echo "$root/tests/fuzz/seeds/cli_args" ;;
    run_config) echo "$root/tests/fuzz/seeds/run_config" ;;
    file_kinds) echo "$root/tests/fuzz/seeds/file_kinds" ;;
    *) echo "unknown target $1" >&2; return 1 ;;
  esac
}
max_len_of() {
  case "$1" in
    units) echo 256 ;;
    run_config) echo 64 ;;
    cli_args | file_kinds) echo 2048 ;;
    config) echo 4096 ;;
    score_store) echo 16384 ;;
    *) echo 65536 ;;
  esac
}

# After libFuzzer's report of kind $1 ("out-of-memory", or "deadly signal": an abort, such as a
# failed assert()) in log $2: "libhwloc" when the first stack frame outside the sanitizer
# runtime, libFuzzer, the C library (raise, abort, __assert_fail) and the allocator is in
# libhwloc.so, "other" when it is elsewhere, nothing when there is no such report.
first_frame_after() {
  awk -v kind="ERROR: libFuzzer: $1" 'index($0, kind) { seen = 1; next }
       seen && /^ *#[0-9]+ / {
         if ($0 ~ /__sanitizer|__asan|__lsan|__interceptor|fuzzer::|\/lib(c|clang_rt|asan)[^ \/]*\.so|in (malloc|calloc|realloc|free|operator new|operator delete)[ (]|in (__GI_)?(raise|abort|__assert_fail|__assert_fail_base|__pthread_kill_implementation|__pthread_kill_internal|pthread_kill|gsignal)(\.cold)? /) next
         print ($0 ~ /libhwloc\.so/ ? "libhwloc" : "other"); exit }' "$2"
}

run_one() {
  local t="$1" exe="$build/tests/fuzz/fuzz_$1" dirs=()
  [ -x "$exe" ] || { echo "fuzz: $exe is missing (configure $build with -Dfuzz=true and build it)" >&2; return 1; }
  mkdir -p "$work/$t"
  read -r -a dirs <<<"$(seeds_of "$t")"
  [ -d "$root/tests/fuzz/regressions/$t" ] && dirs+=("$root/tests/fuzz/regressions/$t")
  # -rss_limit_mb: a parser must not need more than this for one input (libFuzzer's default is
  # 2048); -timeout: one input may take at most 10 s (a hang is a finding too).
  local rc=0 preload="${LD_PRELOAD:-}"
  # hwloc loads its libxml XML importer as a plugin and unloads it when a topology is destroyed;
  # state that plugin set up once (libxml2's) is then unreachable, and LeakSanitizer reports it
  # on whatever input happened to load first (frames in an "<unknown module>"). Kept loaded for
  # the whole run, it is reachable, and a leak per input is still reported.
  if [ "$t" = topology ]; then
    local plugin
    plugin=$(ls /usr/lib/*/hwloc/hwloc_xml_libxml.so 2>/dev/null | head -n 1 || true)
    [ -n "$plugin" ] && preload="$plugin${preload:+:$preload}"
  fi
  local lsan="${LSAN_OPTIONS:-}"
  [ "$t" = topology ] && lsan="suppressions=$root/tests/fuzz/lsan-hwloc.supp${lsan:+:$lsan}"
  # hwloc's import allocates and frees bitmaps of every size an input names. libFuzzer's RSS
  # limit reads the peak RSS, so memory that ASan's quarantine (256 MB by default) keeps, or one
  # huge transient allocation, is charged to whichever input runs when the limit is seen, and
  # the report names no frame. For this target the quarantine is 32 MB (RSS after 890 inputs:
  # 100 MB instead of 236 MB), and one allocation over 512 MB is reported in the act, with the
  # frames that asked for it.
  local asan_extra="" malloc_limit=()
  if [ "$t" = topology ]; then
    asan_extra=":quarantine_size_mb=32"
    malloc_limit=(-malloc_limit_mb=512)
  fi
  LSAN_OPTIONS="$lsan" \
  LD_PRELOAD="$preload" \
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1$asan_extra}" \
  UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
    "$exe" -max_total_time="$seconds" -max_len="$(max_len_of "$t")" -timeout=10 -rss_limit_mb=2048 \
      "${malloc_limit[@]}" \
      -print_final_stats=1 -close_fd_mask=1 -artifact_prefix="$work/artifacts/$t-" \
      "$work/$t" "${dirs[@]}" >"$work/logs/$t.log" 2>&1 || rc=$?
  local execs cov corp
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/logs/$t.log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$work/logs/$t.log" | tail -1 || true)
  corp=$(ls "$work/$t" | wc -l)
  # A crash inside hwloc's own XML import (Debian's hwloc 2.9 dereferences NULL on some
  # malformed topologies: tests/fuzz/known-crashes/README.md) is a third-party finding: it is
  # reported and its input kept, but it does not fail the run. Anything else that stops a
  # target fails it.
  # The same for an out-of-memory that libhwloc itself asked for (its bitmap grows to the
  # largest index a malformed cpuset or nodeset names): the first frame of the report's first
  # stack that is not the sanitizer runtime, libFuzzer or the allocator is in libhwloc.
  if [ "$rc" -ne 0 ] && [ "$(first_frame_after out-of-memory "$work/logs/$t.log")" = libhwloc ]; then
    echo "fuzz $t: stopped after ${execs:-?} inputs at an out-of-memory inside libhwloc (third-party," \
      "known: tests/fuzz/known-crashes/README.md); input in $work/artifacts/, log: $work/logs/$t.log" >&2
    return 0
  fi
  # And an assert() that fails inside libhwloc (hwloc 2.9's bitmap parser asserts on some
  # malformed sets): libFuzzer reports the abort as a deadly signal.
  if [ "$rc" -ne 0 ] && [ "$(first_frame_after "deadly signal" "$work/logs/$t.log")" = libhwloc ]; then
    echo "fuzz $t: stopped after ${execs:-?} inputs at a failed assertion inside libhwloc (third-party," \
      "known: tests/fuzz/known-crashes/README.md); input in $work/artifacts/, log: $work/logs/$t.log" >&2
    return 0
  fi
  if [ "$rc" -ne 0 ] && grep -qE '^SUMMARY: AddressSanitizer: SEGV .*libhwloc\.so' "$work/logs/$t.log"; then
    echo "fuzz $t: stopped after ${execs:-?} inputs at a crash inside libhwloc (third-party," \
      "known: tests/fuzz/known-crashes/README.md); input in $work/artifacts/, log: $work/logs/$t.log" >&2
    return 0
  fi
  if [ "$rc" -ne 0 ]; then
    echo "fuzz $t: FAILED (exit $rc) after ${execs:-?} inputs; log: $work/logs/$t.log" >&2
    grep -E "ERROR|SUMMARY|fuzz property|Test unit written" "$work/logs/$t.log" | head -20 >&2 || true
    return 1
  fi
  printf 'fuzz %-12s %4ss  %10s inputs  %-22s corpus %s files\n' "$t" "$seconds" "${execs:-?}" "${cov:-}" "$corp"
}

# Two at a time: one per core.
failed=0
pids=()
names=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!)
  names+=("$t")
  if [ ${#pids[@]} -ge 2 ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit $failed
