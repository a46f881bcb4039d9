# Shared helpers of the interop harness: logging, stage timing, check accounting, cleanup.
# Sourced by ../run; expects $HERE (tests/interop) and $CACHE to be set.

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

log()  { printf '%s\n' "$*"; }
info() { printf '  %s\n' "$*"; }
# die REASON: the one-line reason the harness cannot run, then the summary line, then exit 1.
die() {
  printf 'interop: cannot run: %s\n' "$*"
  FAILED=$((FAILED + 1))
  summary
  exit 1
}

# err TEXT: print TEXT and keep it as the reason a stage failed (for the one-line verdict).
STAGE_ERR=
err() { STAGE_ERR=$*; printf '%s\n' "$*"; }

# ---- stages: timed steps whose durations are printed at the end ----
STAGE_NAMES=(); STAGE_TIMES=()
# stage NAME COMMAND...: run COMMAND, record its wall time; a failing stage is fatal.
stage() {
  local name=$1; shift
  local t0; t0=$(now)
  log "== $name"
  if ! "$@"; then
    STAGE_NAMES+=("$name"); STAGE_TIMES+=("$(elapsed "$t0")")
    die "${STAGE_ERR:-stage '$name' failed} (stage $name; logs in $LOGDIR)"
  fi
  STAGE_NAMES+=("$name"); STAGE_TIMES+=("$(elapsed "$t0")")
  log "   ($name: ${STAGE_TIMES[-1]} s)"
}
print_timings() {
  local i
  log "-- timings (wall clock, s)"
  for i in "${!STAGE_NAMES[@]}"; do printf '   %-28s %8s\n' "${STAGE_NAMES[$i]}" "${STAGE_TIMES[$i]}"; done
  printf '   %-28s %8s\n' total "$(elapsed "$T_START")"
}

# ---- check accounting ----
PASSED=0; FAILED=0; NOTRUN=()
RESULTS=()
summary() {
  local r
  if [ ${#RESULTS[@]} -gt 0 ]; then
    log "-- results"
    for r in "${RESULTS[@]}"; do log "   $r"; done
  fi
  if [ ${#NOTRUN[@]} -gt 0 ]; then
    # NOTRUN entries are "name: reason"; one line per reason
    log "-- not run (${#NOTRUN[@]}; counted neither passed nor failed)"
    printf '%s\n' "${NOTRUN[@]}" | awk -F': ' '{ r = substr($0, length($1) + 3); if (!(r in n)) o[++k] = r; n[r] = n[r] " " $1 }
      END { for (i = 1; i <= k; i++) printf "   %s:%s\n", o[i], n[o[i]] }'
  fi
  [ ${#STAGE_NAMES[@]} -gt 0 ] && print_timings
  log "$PASSED passed, $FAILED failed"
}

# ---- cleanup: LIFO list of commands run on exit ----
CLEANUPS=()
on_exit() { CLEANUPS+=("$*"); }
run_cleanups() {
  local i
  for ((i = ${#CLEANUPS[@]} - 1; i >= 0; i--)); do eval "${CLEANUPS[$i]}" || true; done
  CLEANUPS=()
}

# stamp_ok DIR KEY: true when DIR/.stamp holds exactly KEY (the inputs it was built from).
stamp_ok() { [ -f "$1/.stamp" ] && [ "$(cat "$1/.stamp")" = "$2" ]; }
stamp_set() { printf '%s' "$2" > "$1/.stamp"; }
