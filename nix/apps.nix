# The flake's apps. `nix run .#sandcastle` runs the loop with git and the
# Docker client (not the engine) on its PATH, ahead of the host's, so a
# machine needs only a Docker engine to talk to. `nix run` cannot run a
# streamLayeredImage package directly (its output is a script file, not a
# directory with bin/), so the image gets an app whose program is that script:
#   nix run .#sandcastleImage | docker load
{ lib, sandcastle, sandcastleImage }:
{
  sandcastle = {
    type = "app";
    program = "${sandcastle}/bin/sandcastle";
    meta.description = "Run the sandcastle pull-request loop (git and the Docker client included)";
  };
} // lib.optionalAttrs (sandcastleImage != null) {
  sandcastleImage = {
    type = "app";
    program = "${sandcastleImage}";
    meta.description = "Stream the sandcastle image to stdout, for `docker load`";
  };
}
