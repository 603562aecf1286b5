// Runs the npm scripts named on the command line at once (`npm run check`'s steps; `npm test` runs the
// checks and the production bundle beside the tests). Each script's output is printed whole when it
// ends, under its name, so outputs never interleave; `--live <script>` prints that one's output as it
// comes instead (the tests', minutes long). The exit code is the first failure's, or 0.
import { spawn } from "node:child_process";

const args = process.argv.slice(2);
const live = args[0] === "--live" ? args[1] : null;
const names = live ? args.slice(1) : args;
if (names.length === 0 || (args[0] === "--live" && !live)) {
  console.error("usage: node scripts/run-parallel.mjs [--live <npm script>] <npm script>...");
  process.exit(2);
}

const run = (name) =>
  new Promise((resolve) => {
    const started = Date.now();
    const child = spawn("npm", ["run", "--silent", name], {
      stdio: name === live ? "inherit" : ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout?.on("data", (chunk) => (output += chunk));
    child.stderr?.on("data", (chunk) => (output += chunk));
    child.on("close", (code, signal) => {
      const status = code ?? (signal ? 1 : 0);
      const seconds = ((Date.now() - started) / 1000).toFixed(0);
      process.stdout.write(`== ${name}: ${status === 0 ? "ok" : `failed (${signal ?? code})`} in ${seconds} s\n`);
      if (output.trim()) process.stdout.write(output.endsWith("\n") ? output : `${output}\n`);
      resolve(status);
    });
  });

const statuses = await Promise.all(names.map(run));
process.exit(statuses.find((status) => status !== 0) ?? 0);
