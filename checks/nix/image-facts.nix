# `nix eval --json <flake>#lib.x86_64-linux --apply "$(cat image-facts.nix)"`
# against the stand-ins: calls mkSandcastleImage with known extras and
# returns what it passed to streamLayeredImage, for test.sh to assert on.
lib:
let
  marker = name: derivation { inherit name; system = "x86_64-linux"; builder = "/bin/sh"; };
  extraOne = marker "extra-content-one";
  extraTwo = marker "extra-content-two";
  image = lib.mkSandcastleImage {
    name = "test-image";
    tag = "test-tag";
    extraContents = [ extraOne extraTwo ];
    extraEnv = [ "EXTRA_ONE=1" "EXTRA_TWO=2" ];
    forgeUrl = "http://127.0.0.1:3000";
  };
  args = image.standIn.arguments;
  describe = drv: {
    inherit (drv) name drvPath;
    function = drv.standIn.function or null;
    arguments = drv.standIn.arguments or { };
  };
in
{
  inherit (image.standIn) function;
  inherit (args) name tag enableFakechroot fakeRootCommands config;
  argumentNames = builtins.attrNames args;
  contents = map describe args.contents;
  sandcastlePackages = map (drv: drv.drvPath) lib.sandcastlePackages;
  extraContents = map (drv: drv.drvPath) [ extraOne extraTwo ];
}
