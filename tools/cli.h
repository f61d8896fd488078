/* The vkfuse CLI: one function per command. */
#ifndef VF_TOOLS_CLI_H
#define VF_TOOLS_CLI_H

#include <stdbool.h>

int cmd_devices(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_amber(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_saved(int argc, char **argv);
int cmd_run(int argc, char **argv);

/* True if argv holds -h or --help. */
bool cli_wants_help(int argc, char **argv);

#endif
