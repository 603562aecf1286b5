/**
 * Runs async operations one at a time, in arrival order. A Durable Object's
 * input gate does not hold across awaits on D1 or other objects, so objects
 * that must not interleave a read-decide-write sequence queue it here.
 *
 * An operation's turn ends when it finishes, or earlier when it calls
 * `endTurn`: a payment ends its turn once it has decided and handed its batch
 * to the ledger, so the next decision need not wait for that batch to commit
 * (pipelining; see HeldFigures for how later decisions account for it).
 */
export function serialQueue() {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(operation: (endTurn: () => void) => Promise<T>): Promise<T> => {
    let endTurn!: () => void;
    const turnEnded = new Promise<void>((resolve) => (endTurn = resolve));
    const run = tail.then(() => operation(endTurn));
    tail = Promise.race([turnEnded, run.catch(() => undefined)]);
    return run;
  };
}
