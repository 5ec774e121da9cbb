parent() { while read -r key value; do [ "$key" = PPid: ] && echo "$value" && return; done < "/proc/$1/status"; } 2>/dev/null
others() {
  alive=
  for status in /proc/[0-9]*/status; do
    pid=${status#/proc/}; pid=${pid%/status}
    case $pid in 1|$$|$keep) continue ;; esac
    grep -q '^State:[[:space:]]*[^Z[:space:]]' "$status" 2>/dev/null && alive="$alive $pid"
  done
}
keep=0
for status in /proc/[0-9]*/status; do
  pid=${status#/proc/}; pid=${pid%/status}
  if [ "$pid" != 1 ] && [ "$(parent "$pid")" = 1 ] && { [ "$keep" = 0 ] || [ "$pid" -lt "$keep" ]; }; then keep=$pid; fi
done
i=0
while [ $i -lt 50 ]; do
  others
  [ -z "$alive" ] && break
  kill -KILL $alive 2>/dev/null
  sleep 0.1; i=$((i+1))
done
if [ -n "$alive" ]; then
  echo "processes $alive of the agent are still running after kill -KILL" >&2
  exit "$failed_status"
fi
