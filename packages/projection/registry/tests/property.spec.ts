import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { harness } from './helpers.js'
import { countUnit, expected, fragileUnit, lastTextUnit } from './units.js'

type Step =
  | { kind: 'user'; text: string }
  | { kind: 'chunk' }
  | { kind: 'tool' }
  | { kind: 'snapshot' }
  | { kind: 'register' }
  | { kind: 'fork' }

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('user' as const), text: fc.string({ maxLength: 4 }) }),
  fc.constant({ kind: 'chunk' as const }),
  fc.constant({ kind: 'tool' as const }),
  fc.constant({ kind: 'snapshot' as const }),
  fc.constant({ kind: 'register' as const }),
  fc.constant({ kind: 'fork' as const }),
)

describe('live cells equal a fold of the whole log', () => {
  it('whatever the interleaving of appends, snapshots, late registrations and forks', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const { sessions, registry } = harness()
        const units = [countUnit, lastTextUnit, fragileUnit]
        let registered = 0
        registry.register(units[registered++]!)
        let session = sessions.create()
        const all = [session]
        let applies = 0
        for (const s of steps) {
          if (s.kind === 'user') session.append('user/message', { text: s.text })
          else if (s.kind === 'chunk') session.append('assistant/chunk', { turn: 1, index: 0, delta: 'x' })
          else if (s.kind === 'tool') session.append('tool/call', { turn: 1, callId: 'c', name: 'n', arguments: null })
          else if (s.kind === 'register' && registered < units.length) registry.register(units[registered++]!)
          else if (s.kind === 'fork') {
            session = sessions.fork(session)
            all.push(session)
          } else if (s.kind === 'snapshot') {
            const before = registry.metrics.applies
            registry.snapshot(session)
            applies += registry.metrics.applies - before
          }
        }
        const keys = registry.keys()
        for (const live of all) {
          expect(registry.snapshot(live)).toEqual(expected(live.events, keys))
          expect(registry.fold(live.events, { inheritedEventCount: live.inheritedEventCount }, keys)).toEqual(expected(live.events, keys))
          expect(registry.viewCheckpoint(JSON.parse(JSON.stringify(registry.checkpoint(live))))).toEqual(registry.snapshot(live))
        }
        // A snapshot only ever folds what no event listener saw (lazy builds), never a live event twice.
        expect(applies).toBeLessThanOrEqual(registry.metrics.logReads)
      }),
      { numRuns: 300 },
    )
  })
})
