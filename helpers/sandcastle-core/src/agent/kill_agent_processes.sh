# field PID KEY: sets $value to KEY's value in /proc/PID/status (empty when gone); no fork, so
# that the scan costs nothing per process.
field() { value=; while read -r key val rest; do [ "$key" = "$2" ] && { value=$val; return; }; done < "/proc/$1/status"; } 2>/dev/null
others() {
  alive=
  for status in /proc/[0-9]*/status; do
    pid=${status#/proc/}; pid=${pid%/status}
    case $pid in 1|$$|$keep) continue ;; esac
    field "$pid" State:
    case $value in ''|Z) ;; *) alive="$alive $pid" ;; esac
  done
}
keep=0
for status in /proc/[0-9]*/status; do
  pid=${status#/proc/}; pid=${pid%/status}
  [ "$pid" = 1 ] && continue
  field "$pid" PPid:
  if [ "$value" = 1 ] && { [ "$keep" = 0 ] || [ "$pid" -lt "$keep" ]; }; then keep=$pid; fi
done
i=0
while [ $i -lt 500 ]; do
  others
  [ -z "$alive" ] && break
  kill -KILL $alive 2>/dev/null
  sleep 0.01; i=$((i+1))
done
if [ -n "$alive" ]; then
  echo "processes $alive of the agent are still running after kill -KILL" >&2
  exit "$failed_status"
fi
