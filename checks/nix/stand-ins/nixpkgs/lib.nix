# The part of nixpkgs' lib that sandcastle's Nix code uses, with the same
# names and semantics. A function sandcastle calls that is missing here fails
# the evaluation test: add it only with nixpkgs' real behaviour.
let
  fix = f: let x = f x; in x;

  hasSuffix = suffix: s:
    let ls = builtins.stringLength s; lsuf = builtins.stringLength suffix;
    in ls >= lsuf && builtins.substring (ls - lsuf) lsuf s == suffix;

  hasPrefix = prefix: s: builtins.substring 0 (builtins.stringLength prefix) s == prefix;

  hasInfix = infix: s: builtins.match ".*${escapeRegex infix}.*" s != null;

  escapeRegex = builtins.replaceStrings
    [ "\\" "[" "]" "{" "}" "(" ")" "." "*" "+" "?" "^" "$" "|" ]
    [ "\\\\" "\\[" "\\]" "\\{" "\\}" "\\(" "\\)" "\\." "\\*" "\\+" "\\?" "\\^" "\\$" "\\|" ];

  splitString = sep: s: builtins.filter builtins.isString (builtins.split (escapeRegex sep) s);

  last = list: assert list != [ ]; builtins.elemAt list (builtins.length list - 1);

  genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);

  optionalAttrs = cond: as: if cond then as else { };

  concatStringsSep = builtins.concatStringsSep;

  optionals = cond: l: if cond then l else [ ];

  assertMsg = pred: msg: pred || builtins.throw msg;

  importTOML = path: builtins.fromTOML (builtins.readFile path);

  # lib.fileset, reduced to `unions` of existing paths and `toSource`.
  fileset = {
    unions = paths:
      assert builtins.all (p: builtins.isPath p && builtins.pathExists p) paths
        || builtins.throw "lib.fileset.unions: every element must be an existing path";
      { _type = "fileset"; inherit paths; };
    toSource = { root, fileset }:
      let
        wanted = map toString fileset.paths;
        keep = path: _type: builtins.any
          (w: path == w || hasPrefix (path + "/") w || hasPrefix (w + "/") path)
          wanted;
      in
      builtins.path { path = root; name = "source"; filter = keep; };
  };
in
{
  inherit fix concatStringsSep hasSuffix hasPrefix hasInfix splitString last genAttrs optionalAttrs optionals
    assertMsg importTOML fileset;
}
