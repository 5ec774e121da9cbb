#!/bin/sh
# An example `[questions] command` bridge: it asks through files, so it works wherever a person
# can read and write this project's directory (a shared disk, a synced folder, an SSH session).
#   [questions]
#   handlers = ["terminal", "forge", "command"]
#   command = ["sh", ".sandcastle/ask-by-file.sh"]
# sandcastle writes the question (JSON, version 1; see the user guide's asking.md) on stdin; this script saves it
# as .sandcastle/questions/question-XXXXXX/request.json and waits for an answer.json beside it,
# e.g. {"version": 1, "by": "alice", "answers": [{"option": 2, "text": "we run MySQL"}]}.
# Write the answer elsewhere and `mv` it in, so the script never reads half of it. Whatever the
# script prints on stdout is the answer; sandcastle checks it and stops the script at the
# question's timeout. A bridge to a chat or a phone has the same shape: read stdin, ask, print.
set -eu
dir="${SANDCASTLE_QUESTIONS_DIR:-.sandcastle/questions}"
mkdir -p "$dir"
here="$(mktemp -d "$dir/question-XXXXXX")"
trap 'rm -rf "$here"' EXIT
# Written beside, then moved in: whoever watches for request.json never reads half of it.
cat > "$here/request.json.part"
mv "$here/request.json.part" "$here/request.json"
echo "waiting for $here/answer.json" >&2
while [ ! -s "$here/answer.json" ]; do
    sleep 2
done
cat "$here/answer.json"
