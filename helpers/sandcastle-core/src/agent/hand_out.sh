# The hand-out trailer (hand_out.rs), printed once nothing of the agent runs any more: the turn's
# marker line "$marker" (`sandcastle-hand-out 1 <the host's word>`), the session file "$session" if it is a regular file, then what the script "$hand_out" (checkout.rs) prints for
# the checkout "$workspace" and the host's tip "$known", or the first line of why it printed nothing;
# then the outbox "$outbox" of `sandcastle ask` if it is a regular file.
printf '\n%s\n' "$marker"
if [ -f "$session" ] && [ ! -L "$session" ]; then
  printf 'session %s\n' "$(wc -c < "$session")"
  cat -- "$session"
fi
# Most turns end at the commit the host has: its id alone, with no scratch file (what "$hand_out"
# would print); anything else is left to "$hand_out", which runs git and makes a bundle. HEAD is
# read here with shell builtins, not git (a fork and git's start-up on every turn): .git/HEAD, and
# the loose ref it names. What it says is only the sandbox's claim, and it is safe to believe: when
# it names the host's own tip the host takes no commits and keeps that tip, so a checkout that lies
# here only loses the agent's own work. A ref git keeps elsewhere (packed, reftable), a detached HEAD
# at another commit, or anything unreadable takes the bundle path. `-f` keeps a FIFO from blocking.
tip=
if [ -f "$workspace/.git/HEAD" ]; then
  IFS= read -r tip < "$workspace/.git/HEAD" || :
  case $tip in
    'ref: refs/heads/'*)
      ref="$workspace/.git/${tip#ref: }" tip=
      if [ -f "$ref" ]; then IFS= read -r tip < "$ref" || :; fi ;;
  esac
fi
scratch=
if [ -n "$known" ] && [ "$tip" = "$known" ]; then
  printf 'commits %s\n%s\n' "$((${#known} + 1))" "$known"
elif ! scratch=$(mktemp -d 2>/dev/null); then
  why="cannot make a scratch directory in the sandbox"
  printf 'commits-refused %s\n%s' "${#why}" "$why"
elif sh -c "$hand_out" sh "$workspace" "$known" > "$scratch/out" 2> "$scratch/err"; then
  printf 'commits %s\n' "$(wc -c < "$scratch/out")"
  cat -- "$scratch/out"
else
  head -n 1 "$scratch/err" | head -c 512 > "$scratch/why"
  printf 'commits-refused %s\n' "$(wc -c < "$scratch/why")"
  cat -- "$scratch/why"
fi
if [ -L "$outbox" ] || { [ -e "$outbox" ] && [ ! -f "$outbox" ]; }; then
  why="the outbox is not a regular file"
  printf 'ask-refused %s\n%s' "${#why}" "$why"
elif [ -f "$outbox" ]; then
  printf 'ask %s\n' "$(wc -c < "$outbox")"
  cat -- "$outbox"
fi
printf 'end\n'
[ -n "$scratch" ] && rm -rf -- "$scratch"
exit "$done_status"
