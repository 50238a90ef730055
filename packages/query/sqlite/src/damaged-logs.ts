import { isDshError } from '@dsh/context'
import type { SessionId } from '@dsh/session'
import type { PersistedSessionRecord, SessionPersistence } from '@dsh/session-persistence'
import { guarded } from '@dsh/session-query/backend'
import type { IndexStore } from './index-store.js'

/**
 * What a header-only listing shows of a log whose body cannot be read
 * (`SESSION_PERSISTENCE_CORRUPT`): `'indexed'` when the index's row is at
 * the log's revision now (its header is this log's header), the listed
 * record otherwise; `'unlisted'` when its header cannot be read either (no
 * listing shows it), `'gone'` when it was deleted since.
 */
export type DamagedLog = PersistedSessionRecord | 'indexed' | 'unlisted' | 'gone'

/**
 * The listed records of damaged logs, for one pass or one listing. A rebuild
 * lists a damaged log from its header frame (`persistence.list()`) and drops
 * only its text; an incremental read names the same log by id, and the
 * contract has no read of one header that does not also prove the log's
 * tail. So a damaged log the index holds no row of at its revision now (new,
 * re-created under a deleted id, or changed since) takes its header from one
 * `persistence.list()`, made at most once per instance: the cost of a
 * listing of headers is paid only when a log is damaged. A row already at
 * the log's revision costs one `stat`.
 */
export class DamagedLogs {
  readonly #persistence: SessionPersistence
  readonly #signal: AbortSignal | undefined
  #listing: Promise<Map<string, PersistedSessionRecord>> | undefined

  constructor(persistence: SessionPersistence, signal: AbortSignal | undefined) {
    this.#persistence = persistence
    this.#signal = signal
  }

  /** What a listing of headers shows of `id`, whose log was found damaged. Rejects with the persistence's failure. */
  async of(store: IndexStore, id: string): Promise<DamagedLog> {
    let revision: string | undefined
    try {
      revision = await guarded(this.#persistence.stat(id as SessionId, this.#signal), this.#signal)
    } catch (error) {
      // A header that cannot be read: no listing of headers shows the log.
      if (isDshError(error, 'SESSION_PERSISTENCE_CORRUPT')) return 'unlisted'
      throw error
    }
    if (revision === undefined) return 'gone'
    if (store.rowState(id)?.revision === revision) return 'indexed'
    this.#listing ??= guarded(this.#persistence.list(this.#signal), this.#signal).then(
      (records) => new Map(records.map((record) => [record.header.id as string, record])),
    )
    // Not listed although `stat` found it: its header unit is damaged, or it was deleted in between.
    return (await this.#listing).get(id) ?? 'unlisted'
  }
}
