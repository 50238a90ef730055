import { Context } from '@dsh/context'
import { type SessionHeader, SessionLogOffset, SessionSeq, SessionStore, type StoredSessionEvent } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import type { IndexProgress } from '@dsh/session-query'
import { type HeaderFields, headerOf, tempDir as kitTempDir } from '@dsh/test-kit'
import { afterEach } from 'vitest'
import { createSqliteSessionQuery, type SqliteSessionQuery, type SqliteSessionQueryOptions } from '../src/index.js'

export const T0 = 1_700_000_000_000
export const silent = { warn: () => {}, error: () => {} }

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

/** Registers `fn` to run after the current test (last registered runs first). */
export function later(fn: () => unknown): void {
  cleanups.push(fn)
}

/** A temporary directory removed after the current test. */
export function tempDir(): string {
  const { dir, cleanup } = kitTempDir('dsh-query-sqlite-')
  later(cleanup)
  return dir
}

export function store(): { ctx: Context; sessions: SessionStore } {
  const ctx = new Context({ logger: silent })
  later(() => ctx.dispose())
  return { ctx, sessions: new SessionStore(ctx) }
}

export function header(id: string, createdAt: number, extra: HeaderFields = {}): SessionHeader {
  return headerOf(id, { createdAt, ...extra })
}

export function message(seq: number, text: string, type = 'user/message'): StoredSessionEvent {
  return { type, seq: SessionSeq(seq), time: T0 + seq, data: type === 'assistant/message' ? { turn: 1, text } : { text } }
}

export async function persist(
  persistence: SessionPersistence,
  h: SessionHeader,
  events: readonly StoredSessionEvent[] = [],
  cut = 0,
): Promise<void> {
  await persistence.append({ header: h, inheritedEventCount: SessionLogOffset(cut) }, events)
}

/** Opens a query over `path`, recording progress; closed after the test. */
export async function openQuery(
  options: Omit<SqliteSessionQueryOptions, 'onProgress'>,
): Promise<{ query: SqliteSessionQuery; progress: IndexProgress[] }> {
  const progress: IndexProgress[] = []
  const query = await createSqliteSessionQuery({ logger: silent, ...options, onProgress: (p) => void progress.push(p) })
  later(() => query.close())
  return { query, progress }
}

export async function code(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
    return 'resolved'
  } catch (error) {
    return (error as { code?: string }).code ?? `untyped: ${String(error)}`
  }
}
