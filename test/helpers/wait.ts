/** Polls `read` every 150 ms until `done` holds, or fails naming `what` and the last value after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: condition not met: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}
