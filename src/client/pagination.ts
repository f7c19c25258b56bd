/** One page of a cursor list, as the API answers it. */
export interface Page<T> {
  data: T[];
  has_more: boolean;
}

/**
 * A cursor list (`limit`, `starting_after` → `{data, has_more}`), read lazily:
 * - `for await (const item of pager)` reads every item, page after page, each page asked for only
 *   when the previous one is used up (`starting_after` = the last id received);
 * - `await pager.page()` reads one page (the first, or the one after the `starting_after` given);
 * - `for await (const page of pager.pages())` reads page by page.
 */
export class Pager<T extends { id: string }> implements AsyncIterable<T> {
  private readonly fetchPage: (startingAfter: string | undefined) => Promise<Page<T>>;
  private readonly startingAfter: string | undefined;

  constructor(
    fetchPage: (startingAfter: string | undefined) => Promise<Page<T>>,
    startingAfter: string | undefined,
  ) {
    this.fetchPage = fetchPage;
    this.startingAfter = startingAfter;
  }

  page(): Promise<Page<T>> {
    return this.fetchPage(this.startingAfter);
  }

  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    let cursor = this.startingAfter;
    for (;;) {
      const page = await this.fetchPage(cursor);
      yield page;
      const last = page.data.at(-1);
      // An empty page that claims more would otherwise be asked for again and again.
      if (!page.has_more || !last) return;
      cursor = last.id;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page.data;
  }

  /** Every item, up to `max` (default: all of them). */
  async toArray(max = Number.POSITIVE_INFINITY): Promise<T[]> {
    const out: T[] = [];
    if (max <= 0) return out;
    for await (const item of this) {
      out.push(item);
      if (out.length >= max) break;
    }
    return out;
  }
}
