import { join } from 'node:path'
import { Context } from '@dsh/context'
import { parseSessionHeader, Session, type SessionHeader, SessionLogOffset, type StoredSessionEvent, sameLifecycle } from '@dsh/session'
import { createProjectionRegistry } from '@dsh/session-projection'
import { headerOf, tempDir } from '@dsh/test-kit'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { checkpointIdentity, SqliteProjectionCache } from '../src/index.js'
import { messagesUnit, turnsUnit } from './helpers.js'

const { dir, cleanup } = tempDir('dsh-cache-')
const projections = createProjectionRegistry(new Context())
projections.register(messagesUnit)
projections.register(turnsUnit)
const cache = new SqliteProjectionCache({ path: join(dir, 'p.sqlite'), projections, sessions: { flush: async () => {} } })
afterAll(() => {
  cache.close()
  cleanup()
})

const KEYS = ['messages', 'turns'] as const

/** Any valid header of session `id`: every witness field varies (a subagent always names its parent). */
function anyHeaderOf(id: string): fc.Arbitrary<SessionHeader> {
  return fc
    .record({
      createdAt: fc.nat({ max: 5 }),
      cwd: fc.option(fc.constantFrom('/a', '/b'), { nil: undefined }),
      parentSession: fc.option(fc.constantFrom('p1', 'p2'), { nil: undefined }),
      isSeeded: fc.boolean(),
      delegationDepth: fc.nat({ max: 2 }),
      origin: fc.option(fc.constant('subagent' as const), { nil: undefined }),
      agentPreset: fc.option(fc.constantFrom('x', 'y'), { nil: undefined }),
    })
    .map((fields) => headerOf(id, fields.origin === undefined ? fields : { ...fields, parentSession: fields.parentSession ?? 'p1' }))
}

/** A lifecycle: a header, its own distinguishable log, and its exact cut. */
interface Life {
  readonly header: SessionHeader
  readonly events: StoredSessionEvent[]
  readonly cut: number
}

function lifeOf(id: string, tag: number): fc.Arbitrary<Life> {
  return fc.tuple(anyHeaderOf(id), fc.nat({ max: 4 }), fc.nat({ max: 4 })).map(([header, count, cutSeed]) => {
    const events = Array.from({ length: count }, (_, seq) => ({
      type: 'user/message',
      seq: seq as never,
      time: 1,
      data: { text: `life ${tag} #${seq}` },
    }))
    return { header, events, cut: Math.min(cutSeed, count) }
  })
}

let run = 0

describe('cachedSnapshot never answers for another lifecycle', () => {
  it('over random sequences of lifecycles of one id and random header changes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }).chain((n) => fc.tuple(...Array.from({ length: n }, (_, tag) => lifeOf('placeholder', tag)))),
        anyHeaderOf('probe'),
        fc.nat({ max: 4 }),
        (lives, probeFields, probeCut) => {
          run++
          const id = `id${run}`
          const written = lives.map((life) => ({ ...life, header: parseSessionHeader({ ...life.header, id }) }))
          const values = written.map((life) => {
            const session = new Session({ header: life.header, events: life.events, inheritedEventCount: life.cut })
            expect(cache.writeColdRows(session, projections.checkpoint(session))).toBe(true)
            return projections.snapshot(session)
          })
          const last = written.at(-1)!
          const lastValue = values.at(-1)!
          // Every lifecycle ever written, plus a random header/cut of the same id.
          const probes = [
            ...written.map((life) => [life.header, life.cut] as const),
            [parseSessionHeader({ ...probeFields, id }), probeCut] as const,
          ]
          for (const [header, cut] of probes) {
            const got = cache.cachedSnapshot(header, SessionLogOffset(cut), KEYS)
            const sameAsLast = sameLifecycle(header, last.header) && cut === last.cut
            expect(checkpointIdentity(header) === checkpointIdentity(last.header)).toBe(sameLifecycle(header, last.header))
            if (sameAsLast) expect(got).toEqual(lastValue)
            else expect(got).toBeUndefined()
          }
        },
      ),
      { numRuns: 300 },
    )
  })
})
