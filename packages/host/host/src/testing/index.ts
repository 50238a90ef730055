import { createHost } from '../host.js'

export interface SearchCorpusOptions {
  readonly sessions: number
  readonly events: number
}

/**
 * `@dsh/host/testing`: fixtures for tests and benchmarks of hosts, not for
 * production code.
 *
 * Writes a JSONL root (created 0700) of `sessions` × `events` user messages,
 * every one holding "the", and indexes it: a search for `the` then steps
 * through every event, so its cost is set by a count, not by the machine.
 * Session ids are `s0`, `s1`, …. The tests that one search never stalls a
 * server and the `serve-search` benchmark use the same corpus.
 */
export async function writeSearchCorpus(root: string, options: SearchCorpusOptions): Promise<void> {
  const host = await createHost({ root })
  try {
    for (let s = 0; s < options.sessions; s++) {
      const session = host.sessions.create({ id: `s${s}` })
      for (let e = 0; e < options.events; e++) session.append('user/message', { text: `the heron nests by the river, note ${e} of ${s}` })
      await host.sessions.dispose(session.id)
    }
  } finally {
    await host.dispose()
  }
}
