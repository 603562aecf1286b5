/**
 * Runs async operations one at a time, in arrival order. A Durable Object's
 * input gate does not hold across awaits on D1 or other objects, so objects
 * that must not interleave a read-decide-write sequence queue it here.
 */
export function serialQueue() {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(operation: () => Promise<T>): Promise<T> => {
    const run = tail.then(operation);
    tail = run.catch(() => undefined);
    return run;
  };
}
