# `sandcastle` as a project runs it on the host: the orchestrator with the
# program it calls, git, first on its PATH. It speaks to the Docker engine's
# API itself: no Docker client.
{ writeShellApplication, git, helpers }:
writeShellApplication {
  name = "sandcastle";
  runtimeInputs = [ git ];
  text = ''
    exec ${helpers}/bin/sandcastle "$@"
  '';
  meta = {
    description = "The sandcastle pull-request loop, with git";
    mainProgram = "sandcastle";
  };
}
