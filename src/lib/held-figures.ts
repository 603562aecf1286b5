/** How a batch handed to the ledger ended, for the figures it was decided on: applied, no effect, or no longer trusted. */
export type BatchEnd = "committed" | "unchanged" | "unsure";

/** What a decision sees: the committed figures, and what batches in flight hold back from them. */
export interface HeldView<T> {
  committed: T;
  /** The sum of the amounts held, in the unit their figures count (an agent's base units, a grant's cents). */
  held: bigint;
  heldCount: number;
}

/**
 * Figures a Durable Object remembers as committed (an agent's balance, a
 * grant's spend), and what its decisions whose batch is still in flight hold
 * back from them. Such an object ends an operation's turn once its batch is
 * handed to the ledger (serialQueue's `endTurn`), so the next decision runs
 * while that batch commits, against the figures less the holds: nothing in
 * flight is spent twice. A hold can only make a decision stricter, so a
 * decision that would not go ahead is made again once nothing is in flight
 * (`decide`): every answer is the one a strictly one-at-a-time object gives.
 * D1 is read only with nothing in flight, so it never misses a hold.
 */
export class HeldFigures<T> {
  private remembered: T | null = null;
  private readonly open = new Set<Promise<void>>();
  private held = 0n;

  get busy(): boolean {
    return this.open.size > 0;
  }

  /** Resolves once no batch is in flight (including batches handed over meanwhile). */
  async settled(): Promise<void> {
    while (this.open.size > 0) await Promise.all([...this.open]);
  }

  /** The next read goes to D1. */
  forget(): void {
    this.remembered = null;
  }

  /** The remembered figures while `stillValid` accepts them, else `load`ed from D1 once nothing is in flight. */
  async read(
    load: () => Promise<T | null | undefined>,
    stillValid: (figures: T) => boolean = () => true,
  ): Promise<HeldView<T> | null> {
    if (this.remembered === null || !stillValid(this.remembered)) {
      await this.settled();
      this.remembered = (await load()) ?? null;
    }
    return this.remembered && { committed: this.remembered, held: this.held, heldCount: this.open.size };
  }

  /**
   * Runs `judge`; if its decision does not go ahead while batches are in
   * flight, waits for them and judges again on what they committed.
   */
  async decide<D>(judge: () => Promise<D>, goesAhead: (decision: D) => boolean): Promise<D> {
    const first = await judge();
    if (goesAhead(first) || !this.busy) return first;
    await this.settled();
    return judge();
  }

  /**
   * Holds `amount` while a batch is in flight. Call the result once with
   * how it ended: `apply` then moves the remembered figures if it committed
   * (and they were not replaced meanwhile); "unsure" forgets them.
   */
  hold(amount: bigint, apply: (figures: T) => void): (end: BatchEnd) => void {
    const figures = this.remembered;
    let done!: () => void;
    const finished = new Promise<void>((resolve) => (done = resolve));
    this.open.add(finished);
    this.held += amount;
    return (end) => {
      if (!this.open.delete(finished)) return;
      this.held -= amount;
      done();
      if (end === "unsure") this.forget();
      else if (end === "committed" && figures !== null && this.remembered === figures) apply(figures);
    };
  }
}
