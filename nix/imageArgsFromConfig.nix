# imageArgsFromConfig ./.sandcastle/config.toml -> { name, tag }
#
# The image's name and tag exactly as `load-config` resolves `imageName`
# (default "sandcastle:<name part of repo>", no tag meaning "latest"), with
# the same checks and the same messages: a `repo` or `imageName` that
# load-config refuses fails the evaluation here too, so no image is built
# under a name sandcastle would not run. helpers/config/src/image.rs has the
# same patterns, and helpers/config/tests/resolution-table.json (written by
# the Rust test of that name) is the table of cases both are checked against.
#
# Nothing else is read from the file: the forge URL is not baked into the
# image (sandcastle passes it to every sandbox), and the rest of the config
# is load-config's to check at run time (`sandcastle doctor`).
{ lib }:
configFile:
let
  config = lib.importTOML configFile;
  fail = why: throw "${toString configFile}: ${why}";
  matches = pattern: text: builtins.match pattern text != null;

  kinds = { string = "a string"; int = "an integer"; float = "a float"; bool = "a boolean"; list = "an array"; set = "a table"; };
  # A non-empty string without whitespace, as load-config's `word`.
  word = key: example: value:
    if !builtins.isString value
    then fail "`${key}` must be a string, found ${kinds.${builtins.typeOf value}}; write e.g. `${key} = ${example}`"
    else if !matches "[^[:space:]]+" value
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
        imageName = builtins.seq repoName (word "imageName" "\"sandcastle:name\"" config.imageName);
        resolved = nameAndTag imageName;
      in
      if resolved ? error then fail "`imageName` \"${imageName}\" ${resolved.error}" else resolved
    else
      let
        imageName = "sandcastle:${repoName}";
        resolved = nameAndTag imageName;
      in
      if resolved ? error
      then fail "`repo` \"${repo}\" makes the default `imageName` \"${imageName}\", which Docker refuses; set `imageName`, e.g. `imageName = \"sandcastle:name\"`"
      else resolved;
in
{ inherit (image) name tag; }
