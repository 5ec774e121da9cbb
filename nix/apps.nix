# The flake's apps. `nix run` cannot run a streamLayeredImage package
# directly (its output is a script file, not a directory with bin/), so the
# image gets an app whose program is that script:
#   nix run .#sandcastleImage | docker load
{ lib, helpers, sandcastleImage }:
{
  sandcastle = {
    type = "app";
    program = "${helpers}/bin/sandcastle";
    meta.description = "Run the sandcastle pull-request loop";
  };
} // lib.optionalAttrs (sandcastleImage != null) {
  sandcastleImage = {
    type = "app";
    program = "${sandcastleImage}";
    meta.description = "Stream the sandcastle image to stdout, for `docker load`";
  };
}
