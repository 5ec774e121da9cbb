# imageArgsFromConfig ./.sandcastle/config.toml -> { name, tag, forgeUrl }
#
# The image's name, tag and forge URL exactly as `load-config` resolves
# `repo`, `forgeHost` and `imageName`, with the same checks, in the same
# order, with the same messages: `imageName` (default
# "sandcastle:<name part of repo>", no tag meaning "latest") as Docker reads
# it, and `forgeHost` as a base URL (a bare host means https; lower-cased, no
# default port, no trailing slash). A config load-config refuses fails the
# evaluation here too, so no image is built that sandcastle would not run.
# helpers/config/src/image.rs and forge.rs are the Rust side, and
# helpers/config/tests/resolution-table.json (written by the Rust test of
# that name) is the table of cases both are checked against.
#
# Nothing else is read from the file: the rest of the config is
# load-config's to check at run time (`sandcastle doctor`).
{ lib }:
configFile:
let
  config = lib.importTOML configFile;
  fail = why: throw "${toString configFile}: ${why}";
  matches = pattern: text: builtins.match pattern text != null;

  kinds = { string = "a string"; int = "an integer"; float = "a float"; bool = "a boolean"; list = "an array"; set = "a table"; };
  contains = part: text: builtins.replaceStrings [ part ] [ "" ] text != text;
  # Every character Rust's `char::is_whitespace` accepts (Unicode White_Space).
  whitespace = builtins.fromJSON ''
    [ "\t", "\n", "\u000b", "\f", "\r", " ", "\u0085", "\u00a0", "\u1680",
      "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006",
      "\u2007", "\u2008", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f",
      "\u205f", "\u3000" ]
  '';
  hasWhitespace = text: builtins.any (space: contains space text) whitespace;
  # A non-empty string without whitespace, as load-config's `word`.
  word = key: example: value:
    if !builtins.isString value
    then fail "`${key}` must be a string, found ${kinds.${builtins.typeOf value}}; write e.g. `${key} = ${example}`"
    else if value == "" || hasWhitespace value
    then fail "`${key}` must be a non-empty string without spaces; write e.g. `${key} = ${example}`"
    else value;

  repo =
    if config ? repo
    then word "repo" "\"owner/name\"" config.repo
    else fail "missing required key `repo`; add `repo = \"owner/name\"` before any [table]";
  repoParts = builtins.match "([^/]*)/(.*)" repo;
  isPart = part: matches "[A-Za-z0-9_.-]+" part && part != "." && part != "..";
  repoName =
    if repoParts == null || !(isPart (builtins.elemAt repoParts 0)) || !(isPart (builtins.elemAt repoParts 1))
    then fail "`repo` must be `owner/name`, found \"${repo}\"; write e.g. `repo = \"owner/name\"`"
    else if lib.hasSuffix ".git" (builtins.elemAt repoParts 1)
    then
      let bare = builtins.head (builtins.match "(.*)[.]git" (builtins.elemAt repoParts 1));
      in fail "`repo` \"${repo}\" ends in .git; write `repo = \"${builtins.elemAt repoParts 0}/${bare}\"`"
    else builtins.elemAt repoParts 1;

  # `forgeHost` -> the forge's base URL, as helpers/config/src/forge.rs has it:
  # a bare host means https, the result is lower-cased (ASCII), drops the
  # scheme's default port and has no trailing slash.
  letters = text: builtins.genList (at: builtins.substring at 1 text) (builtins.stringLength text);
  toLower = builtins.replaceStrings
    (letters "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    (letters "abcdefghijklmnopqrstuvwxyz");
  # { url } or { error } for a forgeHost that is already a word.
  resolveForge = forgeHost:
    let
      # The scheme ends at the first "://".
      split = builtins.split "://" forgeHost;
      hasScheme = builtins.length split > 1;
      schemeText = builtins.head split;
      scheme = if hasScheme then toLower schemeText else "https";
      rest =
        if hasScheme
        then builtins.substring (builtins.stringLength schemeText + 3) (-1) forgeHost
        else forgeHost;
      defaultPort = { https = 443; http = 80; }.${scheme} or null;
      authority = if lib.hasSuffix "/" rest then builtins.substring 0 (builtins.stringLength rest - 1) rest else rest;
      beforePath = builtins.head (builtins.split "[/?#]" authority);
      hostPort = splitHostPort authority;
      host = toLower hostPort.host;
    in
    if defaultPort == null
    then { error = "has the scheme `${scheme}`; only https:// and http:// forges are supported, e.g. \"https://forge.example.dev\""; }
    else if beforePath != authority
    then { error = "has a path; write only the forge's host or base URL, e.g. \"${scheme}://${beforePath}\""; }
    else if contains "@" authority
    then { error = "contains user info; drop the `user@` part (the token comes from FORGEJO_TOKEN)"; }
    else if hostPort ? error
    then hostPort
    else if hostPort.port != null && hostPort.port != defaultPort
    then { url = "${scheme}://${host}:${toString hostPort.port}"; }
    else { url = "${scheme}://${host}"; };

  # { host, port } (port null when there is none) or { error }.
  splitHostPort = authority:
    let
      ipv6 = builtins.match "\\[([^]]*)](.*)" authority;
      address = builtins.elemAt ipv6 0;
      after = builtins.elemAt ipv6 1;
      colon = builtins.match "([^:]*):(.*)" authority;
      parts =
        if lib.hasPrefix "[" authority
        then
          if ipv6 == null
          then { error = "has an unclosed `[`; write an IPv6 host as \"[::1]:3000\""; }
          else if !matches "[0-9A-Fa-f:.]+" address
          then { error = "has an invalid IPv6 address `${address}`; write it as \"[::1]:3000\""; }
          else if after == ""
          then { host = "[${address}]"; port = null; }
          else if lib.hasPrefix ":" after
          then { host = "[${address}]"; port = builtins.substring 1 (-1) after; }
          else { error = "has text after `]`; write an IPv6 host as \"[::1]:3000\""; }
        else if colon == null
        then { host = authority; port = null; }
        else { host = builtins.elemAt colon 0; port = builtins.elemAt colon 1; };
      port = parsePort parts.port;
    in
    if parts ? error
    then parts
    else if !(lib.hasPrefix "[" parts.host || matches hostNamePattern parts.host)
    then { error = "has an invalid host name `${parts.host}`; write a host like \"forge.example.dev\" or \"127.0.0.1:3000\""; }
    else if parts.port != null && port == null
    then { error = "has an invalid port `${parts.port}`; write a port from 1 to 65535, e.g. \"127.0.0.1:3000\""; }
    else { inherit (parts) host; inherit port; };
  # Labels of ASCII letters, digits and `-`, none empty or starting with `-`.
  hostNamePattern = "[A-Za-z0-9][A-Za-z0-9-]*([.][A-Za-z0-9][A-Za-z0-9-]*)*";
  # A port from 1 to 65535 (leading zeros allowed, as Rust's u16 parse), or null.
  parsePort = text:
    let digits = builtins.match "0*([0-9]*)" text;
    in
    if text == null || digits == null then null
    else
      let
        significant = builtins.head digits;
        number = if significant == "" then 0 else builtins.fromJSON significant;
      in
      if builtins.stringLength significant > 5 || number < 1 || number > 65535 then null else number;

  forgeUrl =
    let
      forgeHost =
        if config ? forgeHost
        then builtins.seq repoName (word "forgeHost" "\"forge.example.dev\"" config.forgeHost)
        else builtins.seq repoName (fail "missing required key `forgeHost`; add `forgeHost = \"forge.example.dev\"` before any [table]");
      resolved = resolveForge forgeHost;
    in
    if resolved ? error then fail "`forgeHost` \"${forgeHost}\" ${resolved.error}" else resolved.url;

  # Docker's reference grammar, as helpers/config/src/image.rs has it.
  tagPattern = "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}";
  pathComponentPattern = "[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*";
  domainPattern = "[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:[0-9]+)?";
  example = "e.g. \"sandcastle:name\" or \"registry.example.dev:5000/team/sandcastle:v1\"";

  # { name, tag } of an image name, or { error } saying why Docker refuses it.
  nameAndTag = imageName:
    let
      # A `:` after the last `/` starts the tag; one before it is a registry's port.
      withTag = builtins.match "(.*):([^:/]*)" imageName;
      name = if withTag == null then imageName else builtins.elemAt withTag 0;
      tag = if withTag == null then "latest" else builtins.elemAt withTag 1;
      components = lib.splitString "/" name;
      first = builtins.head components;
      hasDomain = builtins.length components > 1
        && (lib.hasInfix "." first || lib.hasInfix ":" first || first == "localhost");
      path = if hasDomain then builtins.tail components else components;
      badParts = builtins.filter (part: !matches pathComponentPattern part) path;
    in
    if lib.hasInfix "@" imageName
    then { error = "has a digest; name the image with a tag instead, ${example}"; }
    else if !matches tagPattern tag
    then { error = "has the tag `${tag}`, which Docker refuses (letters, digits, `_`, `.` and `-`, not starting with `.` or `-`, at most 128); write ${example}"; }
    else if builtins.stringLength name > 255
    then { error = "has a name longer than 255 characters; write a shorter one, ${example}"; }
    else if hasDomain && !matches domainPattern first
    then { error = "has the registry `${first}`, which Docker refuses; write ${example}"; }
    else if badParts != [ ]
    then { error = "has the name part `${builtins.head badParts}`, which Docker refuses (lower-case letters and digits, joined by `.`, `_`, `__` or `-`); write ${example}"; }
    else { inherit name tag; };

  image =
    if config ? imageName
    then
      let
        imageName = builtins.seq forgeUrl (word "imageName" "\"sandcastle:name\"" config.imageName);
        resolved = nameAndTag imageName;
      in
      if resolved ? error then fail "`imageName` \"${imageName}\" ${resolved.error}" else resolved
    else
      let
        imageName = builtins.seq forgeUrl "sandcastle:${repoName}";
        resolved = nameAndTag imageName;
      in
      if resolved ? error
      then fail "`repo` \"${repo}\" makes the default `imageName` \"${imageName}\", which Docker refuses; set `imageName`, e.g. `imageName = \"sandcastle:name\"`"
      else resolved;
in
# load-config's order: repo, then forgeHost, then imageName; the first wrong
  # one is the error.
builtins.seq image { inherit (image) name tag; inherit forgeUrl; }
