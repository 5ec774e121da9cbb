# `sandcastle` as a project runs it on the host: the orchestrator with the
# programs it calls, git and the Docker client (`docker-client`: the CLI
# only, no engine), first on its PATH.
{ writeShellApplication, git, docker-client, helpers }:
writeShellApplication {
  name = "sandcastle";
  runtimeInputs = [ git docker-client ];
  text = ''
    exec ${helpers}/bin/sandcastle "$@"
  '';
  meta = {
    description = "The sandcastle pull-request loop, with git and the Docker client";
    mainProgram = "sandcastle";
  };
}
