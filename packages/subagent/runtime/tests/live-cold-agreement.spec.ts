import type { Session } from '@dsh/session'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ExplainedSubagentEntry, explainChildren, type SubagentListEntry } from '../src/index.js'
import { BACKENDS, openPlace, type Place } from './backends.js'
import { harnessAccepts } from './harness-descriptor-schema.js'
import { completedTurn, type Host } from './helpers.js'

/**
 * Live and cold listings agree row for row (apart from activity and rung) on
 * harness-shaped child logs: a descriptor anywhere in the child's own events
 * (first, or inside its first turn after `turn/start`, or later), valid,
 * poisoned or of an unknown version, on seeded (forked) and fresh children.
 * And every row is what the harness's own parser says: a child row exactly
 * when it accepts the descriptor.
 */

// Any string is a label (the harness's rule): beyond ASCII, any code units, lone surrogates included
// (fc.string's 'binary' unit draws whole code points only, so a lone half is drawn on its own too).
const anyCodeUnit = fc.oneof(
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), weight: 9 },
  { arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => String.fromCharCode(unit)), weight: 1 },
)
const label = fc.oneof(
  fc.constant(''),
  fc.string({ maxLength: 8 }),
  fc.string({ unit: anyCodeUnit, maxLength: 8 }),
  fc.constantFrom('reviewer', 'scan logs'),
)
const toolFilter = fc.oneof(
  fc.record({ allow: fc.array(fc.string({ maxLength: 4 }), { maxLength: 2 }) }),
  fc.record({ deny: fc.array(fc.string({ maxLength: 4 }), { maxLength: 2 }) }),
  fc.record({ allow: fc.array(fc.string({ maxLength: 4 })), deny: fc.array(fc.string({ maxLength: 4 })) }),
)
const provider = fc.oneof(fc.constant('scripted'), fc.string({ maxLength: 6 }))

const validOneShot = fc.record(
  { version: fc.constant(2), mode: fc.constant('one-shot'), provider, label },
  { requiredKeys: ['version', 'mode', 'provider'] },
)
const validContinuable = fc.record(
  {
    version: fc.constant(2),
    mode: fc.constant('continuable'),
    provider,
    label,
    agentProvider: fc.string({ maxLength: 6 }),
    agentModel: fc.string({ maxLength: 6 }),
    persona: fc.string({ maxLength: 12 }),
    toolFilter,
  },
  { requiredKeys: ['version', 'mode', 'provider', 'label'] },
)
const poisoned = fc.oneof(
  fc.constant({ version: 2, mode: 'continuable', provider: 'p' }),
  validOneShot.map((d) => ({ ...d, persona: 'one-shot children have no persona' })),
  validOneShot.map((d) => ({ ...d, outputSchema: { type: 'object' } })),
  validContinuable.map((d) => ({ ...d, model: 'dsh-only' })),
  validContinuable.map((d) => ({ ...d, toolFilter: {} })),
  validContinuable.map((d) => ({ ...d, label: 7 })),
  fc.constantFrom(null, 'descriptor', [2, 'one-shot'], { version: 2, mode: 'forever', provider: 'p' }, { version: 2, mode: 'one-shot' }),
)
const unknownVersion = fc
  .tuple(
    fc.oneof(validOneShot, validContinuable),
    fc.oneof(
      fc.integer({ min: -3, max: 9 }).filter((v) => v !== 2),
      fc.constant('2'),
    ),
  )
  .map(([d, version]) => ({ ...d, version }))

const childSpec = fc.record({
  seeded: fc.boolean(),
  payload: fc.oneof(validOneShot, validContinuable, poisoned, unknownVersion),
  /** Own events around the descriptor: complete turns, and maybe a last one still open. */
  turns: fc.integer({ min: 0, max: 3 }),
  openTurn: fc.boolean(),
  /** Where the descriptor goes among the own events (clamped to their count). */
  position: fc.nat({ max: 20 }),
})

const family = fc.record({
  /** The parent is a subagent itself, so a seeded child inherits its (valid) descriptor. */
  parentIsSubagent: fc.boolean(),
  children: fc.array(childSpec, { minLength: 1, maxLength: 5 }),
})

type Own = { type: string; data: unknown }

function ownEvents(turns: number, openTurn: boolean): Own[] {
  const events: Own[] = []
  for (let i = 0; i < turns + (openTurn ? 1 : 0); i++) {
    const turn = 10 + i
    events.push({ type: 'turn/start', data: { turn } })
    events.push({ type: 'user/message', data: { text: `prompt ${turn}` } })
    if (i < turns) {
      events.push({ type: 'assistant/message', data: { turn, text: `answer ${turn}` } })
      events.push({ type: 'turn/end', data: { turn, reason: 'completed' } })
    }
  }
  return events
}

/** Activity and rung apart, a row as the comparison sees it. */
function plain(entry: ExplainedSubagentEntry): unknown {
  const { activity: _activity, ...rest } = entry.row as SubagentListEntry & { activity?: string }
  return rest
}

let run = 0

describe.each(BACKENDS)('live, warm-cache and no-cache listings agree (%s)', (backend) => {
  let place: Place
  let h: Host
  beforeAll(async () => {
    place = await openPlace(backend)
    h = await place.open()
  })
  afterAll(async () => {
    await place.close()
  })

  it('row for row, on random harness-shaped child logs', async () => {
    await fc.assert(
      fc.asyncProperty(family, async ({ parentIsSubagent, children }) => {
        const tag = `${backend}-${++run}`
        const top = h.sessions.create({ id: `${tag}-top` })
        const parent = parentIsSubagent
          ? h.sessions.create({ id: `${tag}-parent`, origin: 'subagent', parentSession: top.id, delegationDepth: 1 })
          : h.sessions.create({ id: `${tag}-parent` })
        if (parentIsSubagent) parent.append('subagent/descriptor', { version: 2, mode: 'continuable', provider: 'p', label: 'ancestor' })
        completedTurn(parent, 1)
        const depth = parent.header.delegationDepth + 1
        const live: Session[] = []
        children.forEach((spec, i) => {
          const id = `${tag}-child-${i}`
          const child = spec.seeded
            ? h.sessions.fork(parent, { origin: 'subagent', delegationDepth: depth, childId: id })
            : h.sessions.create({ id, origin: 'subagent', parentSession: parent.id, delegationDepth: depth })
          const own = ownEvents(spec.turns, spec.openTurn)
          own.splice(Math.min(spec.position, own.length), 0, { type: 'subagent/descriptor', data: spec.payload })
          for (const event of own) child.append(event.type, event.data as never)
          live.push(child)
        })

        const liveRows = await h.runtime.explainChildren(parent.id)
        expect(liveRows.map((e) => e.rung)).toEqual(children.map(() => 1))
        expect(liveRows.every((e) => e.row.kind === 'diagnostic' || e.row.activity === 'running')).toBe(true)
        // The oracle: a child row exactly when the harness accepts the descriptor, corrupt otherwise.
        expect(liveRows.map((e) => (e.row.kind === 'child' ? 'child' : e.row.reason))).toEqual(
          children.map((c) => (harnessAccepts(c.payload) ? 'child' : 'corrupt')),
        )

        await Promise.all(live.map((child) => h.sessions.dispose(child.id)))
        const cache = h.ctx.require('sessionProjectionCache')
        await cache.idle()
        // The PostgreSQL cache serves lookups from a mirror of its table that
        // may lag it (a refresh run for an earlier write can land after a
        // later one); a refresh brings it up to the table. A lagging mirror
        // costs a body read, never a different row.
        if ('refresh' in cache) await (cache as { refresh(): Promise<void> }).refresh()
        const warm = await h.runtime.explainChildren(parent.id)
        const cold = await explainChildren(
          { sessions: h.sessions, sessionProjections: h.projections, sessionQuery: h.ctx.require('sessionQuery') },
          parent.id,
        )
        expect(cold.map((e) => e.rung)).toEqual(children.map(() => 3))
        expect(warm.map(plain)).toEqual(liveRows.map(plain))
        expect(cold.map(plain)).toEqual(liveRows.map(plain))
        // A valid identity is served by the checkpoint cache once the child is cold; nothing else is.
        expect(warm.map((e) => e.rung)).toEqual(liveRows.map((e) => (e.row.kind === 'child' ? 2 : 3)))
        await h.sessions.dispose(parent.id)
        await h.sessions.dispose(top.id)
      }),
      { numRuns: backend === 'memory' ? 60 : 25 },
    )
  }, 600_000) // bounded by runs; the timeout only guards a hang
})
