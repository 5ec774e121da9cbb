# The base set of every sandcastle image: the tools the agents and the
# helpers call, Claude Code and the helpers themselves.
{ bash
, coreutils
, curl
, findutils
, gawk
, git
, gnugrep
, gnused
, jq
, nix
, nodejs
, openssl
, pkg-config
, which
, tea
, cacert
, claude-code
, helpers
}:
[
  bash
  coreutils
  curl
  findutils
  gawk
  git
  gnugrep
  gnused
  jq
  nix
  nodejs
  openssl
  pkg-config
  which
  tea
  cacert
  claude-code
  helpers
]
