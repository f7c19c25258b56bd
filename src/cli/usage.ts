/** `voice-service --help`: the executable's commands. */
export const USAGE = `Usage: voice-service [command]

Commands:
  serve                  Serve the API (the default): JSON-line logs on stdout, stops on SIGTERM.
  migrate                Apply the database migrations, then exit.
  admin <command> …      Operator commands, straight on the database; \`voice-service admin help\` lists them.
  --version              Print the version.
  --help, -h, help       Print this help.

Configuration comes from environment variables (PORT, HOST, DATABASE_URL, DATA_DIR, ADMIN_TOKEN, …):
see the Configuration section of the README.
`;

/** What an unknown command prints on stderr (exit 2). */
export function unknownCommand(command: string): string {
  return `unknown command: ${command}\nusage: voice-service [serve | migrate | admin <command> | --version | --help]\n`;
}

/** True for the words that ask for the help. */
export function asksForHelp(command: string): boolean {
  return command === "--help" || command === "-h" || command === "help";
}
