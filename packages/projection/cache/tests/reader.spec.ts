import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Context } from '@dsh/context'
import { parseSessionHeader, Session, type StoredSessionEvent } from '@dsh/session'
import { createProjectionRegistry } from '@dsh/session-projection'
import { headerOf, tempDir } from '@dsh/test-kit'
import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointReader, SqliteProjectionCache } from '../src/index.js'
import { messagesUnit, turnsUnit } from './helpers.js'

const { dir, cleanup } = tempDir('dsh-cache-reader-')
afterAll(cleanup)

const projections = createProjectionRegistry(new Context())
projections.register(messagesUnit)
projections.register(turnsUnit)

const events = (texts: string[]): StoredSessionEvent[] =>
  texts.map((text, seq) => ({ type: 'user/message', seq: seq as never, time: 1, data: { text } }))

/** A cache file holding the checkpoint of one session with two messages, cut at 1. */
function warmFile(name: string): { path: string; session: Session } {
  const path = join(dir, name)
  const cache = new SqliteProjectionCache({ path, projections, sessions: { flush: async () => {} } })
  const session = new Session({ header: headerOf('s1'), events: events(['a', 'b']), inheritedEventCount: 1 })
  expect(cache.writeColdRows(session, projections.checkpoint(session))).toBe(true)
  cache.close()
  return { path, session }
}

describe('CheckpointReader', () => {
  it("answers a unit's state for the exact lifecycle, cut and state version, one primary-key read each", () => {
    const { path, session } = warmFile('warm.sqlite')
    const reader = new CheckpointReader(path)
    expect(reader.state(session.header, 1, 'messages', 1)).toEqual({ n: 2, last: 'b' })
    expect(reader.state(session.header, 1, 'turns', 2)).toEqual({ ended: 0 })
    // Another cut, state version, key or lifecycle of the same id: a miss.
    expect(reader.state(session.header, 0, 'messages', 1)).toBeUndefined()
    expect(reader.state(session.header, 1, 'messages', 2)).toBeUndefined()
    expect(reader.state(session.header, 1, 'absent', 1)).toBeUndefined()
    expect(reader.state(parseSessionHeader({ ...session.header, createdAt: 2 }), 1, 'messages', 1)).toBeUndefined()
    expect(reader.metrics).toEqual({ reads: 6, hits: 2 })
    reader.close()
  })

  it('never creates, changes or removes anything: a missing file misses, a foreign one is left as it is', () => {
    const missing = join(dir, 'nested', 'missing.sqlite')
    const warnings: string[] = []
    const logger = { warn: (message: string) => void warnings.push(message), error: (message: string) => void warnings.push(message) }
    const none = new CheckpointReader(missing, logger)
    expect(none.state(headerOf('s1'), 0, 'messages', 1)).toBeUndefined()
    expect(none.metrics.reads).toBe(0)
    none.close()
    expect(existsSync(join(dir, 'nested'))).toBe(false)
    expect(warnings).toEqual([])

    const foreign = join(dir, 'foreign.sqlite')
    writeFileSync(foreign, 'not a database, and not ours to remove')
    const before = statSync(foreign).mtimeMs
    const reader = new CheckpointReader(foreign, logger)
    expect(reader.state(headerOf('s1'), 0, 'messages', 1)).toBeUndefined()
    reader.close()
    expect(statSync(foreign).mtimeMs).toBe(before)
    expect(readdirSync(dir).filter((name) => name.startsWith('foreign'))).toEqual(['foreign.sqlite'])
    expect(warnings.length).toBeGreaterThan(0)
  })
})
