import { SESSION_HEADER_WITNESS_FIELDS, type Session, type SessionHeader } from '@dsh/session'
import { MemoryPersistenceStorage } from '@dsh/session-persistence'
import { describe, expect, it } from 'vitest'
import { createScriptedDriver, DEFAULT_COLD_READ_CONCURRENCY, listChildren, listDescendants, type SubagentListEntry } from '../src/index.js'
import { bodyReads, codeOf, completedTurn, gate, type Host, holdScript, hostsPerTest, queryProbe } from './helpers.js'

const { open: host } = hostsPerTest()

const descriptor = (mode: 'one-shot' | 'continuable', label?: string) => ({
  version: 2,
  mode,
  provider: 'scripted',
  ...(label === undefined ? {} : { label }),
})

/** A subagent child built by hand (to shape its log exactly), settled cold. */
async function settledChild(
  h: Host,
  parent: Session,
  build: (child: Session) => void,
  options: { id?: string; fork?: Session; createdAt?: number } = {},
): Promise<string> {
  const depth = parent.header.delegationDepth + 1
  const child = options.fork
    ? h.sessions.fork(options.fork, {
        origin: 'subagent',
        parentSession: parent.id,
        delegationDepth: depth,
        ...(options.id ? { childId: options.id } : {}),
        ...(options.createdAt ? { createdAt: options.createdAt } : {}),
      })
    : h.sessions.create({
        origin: 'subagent',
        parentSession: parent.id,
        delegationDepth: depth,
        ...(options.id ? { id: options.id } : {}),
        ...(options.createdAt ? { createdAt: options.createdAt } : {}),
      })
  build(child)
  await h.sessions.dispose(child.id)
  return child.id
}

function describeRows(rows: readonly SubagentListEntry[]): string[] {
  return rows.map((row) =>
    row.kind === 'child'
      ? `${row.id}:${row.activity}:${row.mode}:${row.label ?? '-'}${row.hasChildren ? ':+' : ''}`
      : `${row.id}:${row.reason}`,
  )
}

describe('listChildren: the live rung', () => {
  it('serves a running child from the watermark snapshot with zero log reads', async () => {
    const probe = queryProbe()
    const hold = gate()
    const h = await host({ query: probe.wrap, driver: createScriptedDriver(holdScript(hold.promise)) })
    const parent = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh' })
    await new Promise((resolve) => setTimeout(resolve, 5))
    const reads = bodyReads(h)
    const explained = await h.runtime.explainChildren(parent.id)
    expect(explained).toEqual([
      {
        row: { kind: 'child', id: child.id, activity: 'running', hasChildren: false, mode: 'continuable', label: 'helper' },
        rung: 1,
        parentId: parent.id,
        depth: 1,
        tokens: null,
        durationMs: expect.any(Number),
        startedAt: expect.any(Number),
        endedAt: expect.any(Number),
        closed: false,
      },
    ])
    expect(bodyReads(h) - reads).toBe(0)
    expect(probe.calls.observeSession).toBe(0)
    hold.open()
    await child.done
    // Settled: now cold, and without a cache it takes one observation.
    expect(await h.runtime.explainChildren(parent.id)).toEqual([
      {
        row: { kind: 'child', id: child.id, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'helper' },
        rung: 3,
        parentId: parent.id,
        depth: 1,
        tokens: null,
        durationMs: expect.any(Number),
        startedAt: expect.any(Number),
        endedAt: expect.any(Number),
        closed: false,
      },
    ])
    expect(bodyReads(h) - reads).toBe(1)
  })

  it('gives a running seeded child nothing of its ancestor: no row until its own descriptor lands, corrupt when that descriptor is poisoned', async () => {
    const h = await host()
    const top = h.sessions.create()
    // A subagent parent whose own descriptor sits in every fork of it.
    const parent = h.sessions.create({ origin: 'subagent', parentSession: top.id, delegationDepth: 1 })
    parent.append('subagent/descriptor', descriptor('continuable', 'ancestor'))
    completedTurn(parent, 1)
    const healthy = h.sessions.fork(parent, { origin: 'subagent', delegationDepth: 2, childId: 'healthy', createdAt: 1 })
    const poisoned = h.sessions.fork(parent, { origin: 'subagent', delegationDepth: 2, childId: 'poisoned', createdAt: 2 })
    expect(h.projections.snapshot(healthy, ['subagent']).subagent).toMatchObject({ label: 'ancestor' })
    expect(await h.runtime.listChildren(parent.id)).toEqual([])
    // Running with own events but no descriptor of its own: still the creation window.
    for (const child of [healthy, poisoned]) child.append('turn/start', { turn: 2 })
    expect(await h.runtime.listChildren(parent.id)).toEqual([])
    // Each writes its descriptor inside its first turn, after turn/start (as the harness does).
    healthy.append('subagent/descriptor', descriptor('one-shot', 'own'))
    poisoned.append('subagent/descriptor', { ...descriptor('one-shot', 'own'), persona: 'not on a one-shot' })
    expect(await h.runtime.listChildren(parent.id)).toEqual([
      { kind: 'child', id: 'healthy', activity: 'running', hasChildren: false, mode: 'one-shot', label: 'own' },
      { kind: 'diagnostic', id: 'poisoned', reason: 'corrupt' },
    ])
    // Cold, both keep their verdicts.
    for (const child of [healthy, poisoned]) child.append('turn/end', { turn: 2, reason: 'completed' })
    await h.sessions.dispose('healthy')
    await h.sessions.dispose('poisoned')
    expect(await h.runtime.listChildren(parent.id)).toEqual([
      { kind: 'child', id: 'healthy', activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'own' },
      { kind: 'diagnostic', id: 'poisoned', reason: 'corrupt' },
    ])
  })

  it('gives a running child whose own descriptor is poisoned a corrupt row, not an omit, wherever the descriptor sits', async () => {
    const h = await host()
    const parent = h.sessions.create()
    const first = h.sessions.create({ origin: 'subagent', parentSession: parent.id, delegationDepth: 1, id: 'a', createdAt: 1 })
    first.append('subagent/descriptor', { version: 9, mode: 'one-shot', provider: 'p' })
    const late = h.sessions.create({ origin: 'subagent', parentSession: parent.id, delegationDepth: 1, id: 'b', createdAt: 2 })
    late.append('turn/start', { turn: 1 })
    late.append('user/message', { text: 'go' })
    late.append('subagent/descriptor', { version: 2, mode: 'continuable', provider: 'p' })
    // A healthy descriptor replaced by a poisoned one (last-wins) is poisoned too.
    const replaced = h.sessions.create({ origin: 'subagent', parentSession: parent.id, delegationDepth: 1, id: 'c', createdAt: 3 })
    replaced.append('turn/start', { turn: 1 })
    replaced.append('subagent/descriptor', descriptor('one-shot', 'first'))
    replaced.append('subagent/descriptor', { version: 2, mode: 'one-shot', provider: 'p', label: 42 })
    expect(await h.runtime.listChildren(parent.id)).toEqual([
      { kind: 'diagnostic', id: 'a', reason: 'corrupt' },
      { kind: 'diagnostic', id: 'b', reason: 'corrupt' },
      { kind: 'diagnostic', id: 'c', reason: 'corrupt' },
    ])
  })

  it('omits a running child whose descriptor is not appended yet', async () => {
    const h = await host()
    const parent = h.sessions.create()
    h.sessions.create({ origin: 'subagent', parentSession: parent.id, delegationDepth: 1 })
    expect(await h.runtime.listChildren(parent.id)).toEqual([])
  })
})

describe('listChildren: cold children without a cache (rung 3)', () => {
  it('folds one observation per cold child through the registered unit, with no error or warning', async () => {
    const h = await host()
    const parent = h.sessions.create()
    const a = h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh' })
    const b = h.runtime.spawn(parent, { mode: 'continuable', label: 'b', context: 'fork' })
    await Promise.all([a.done, b.done])
    const reads = bodyReads(h)
    const explained = await h.runtime.explainChildren(parent.id)
    expect(explained.map((e) => e.rung)).toEqual([3, 3])
    expect(explained.map((e) => e.row)).toEqual([
      { kind: 'child', id: a.id, activity: 'inactive', hasChildren: false, mode: 'one-shot' },
      { kind: 'child', id: b.id, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'b' },
    ])
    expect(bodyReads(h) - reads).toBe(2)
    expect(h.warnings).toEqual([])
    expect(h.errors).toEqual([])
  })

  it('never gives a seeded child its ancestor identity (the seq gate against the observed cut)', async () => {
    const h = await host()
    const top = h.sessions.create()
    const parent = h.sessions.create({ origin: 'subagent', parentSession: top.id, delegationDepth: 1 })
    parent.append('subagent/descriptor', descriptor('continuable', 'ancestor'))
    completedTurn(parent, 1)
    const heir = await settledChild(h, parent, (c) => completedTurn(c, 2), { fork: parent })
    const own = await settledChild(h, parent, (c) => c.append('subagent/descriptor', descriptor('one-shot', 'own')), { fork: parent })
    expect(describeRows(await h.runtime.listChildren(parent.id))).toEqual([`${heir}:corrupt`, `${own}:inactive:one-shot:own`])
  })

  it.each([
    ['no descriptor', (c: Session) => completedTurn(c, 1)],
    ['a corrupt descriptor', (c: Session) => c.append('subagent/descriptor', { version: 2, mode: 'continuable', provider: 'p' })],
    ['an unknown-version descriptor', (c: Session) => c.append('subagent/descriptor', { version: 3, mode: 'one-shot', provider: 'p' })],
    [
      'a healthy descriptor followed by a corrupt one',
      (c: Session) => {
        c.append('subagent/descriptor', descriptor('one-shot', 'first'))
        c.append('subagent/descriptor', { version: 2, mode: 'one-shot', provider: 'p', label: 42 })
      },
    ],
  ])('reports a settled child with %s as corrupt', async (_name, build) => {
    const h = await host()
    const parent = h.sessions.create()
    const id = await settledChild(h, parent, build)
    expect(await h.runtime.listChildren(parent.id)).toEqual([{ kind: 'diagnostic', id, reason: 'corrupt' }])
  })

  it('takes the last of several own descriptors (a recorded deviation: last-wins rather than corrupt)', async () => {
    const h = await host()
    const parent = h.sessions.create()
    const id = await settledChild(h, parent, (c) => {
      c.append('subagent/descriptor', descriptor('one-shot', 'first'))
      c.append('subagent/descriptor', descriptor('continuable', 'second'))
    })
    expect(describeRows(await h.runtime.listChildren(parent.id))).toEqual([`${id}:inactive:continuable:second`])
  })

  it('turns a failed cold read into an unavailable row, leaves siblings alone and retries on the next listing', async () => {
    const storage = new MemoryPersistenceStorage()
    const h = await host({ storage })
    const parent = h.sessions.create()
    const good = h.runtime.spawn(parent, { mode: 'one-shot', label: 'good', context: 'fresh' })
    const bad = h.runtime.spawn(parent, { mode: 'one-shot', label: 'bad', context: 'fresh' })
    await Promise.all([good.done, bad.done])
    // Damage the stored body of one child (its header frame stays readable).
    const log = storage.logs.get(bad.id)!
    const batch = log.batches[0]!
    const original = batch.text
    batch.text = original.slice(0, -5)
    expect(describeRows(await h.runtime.listChildren(parent.id))).toEqual([`${good.id}:inactive:one-shot:good`, `${bad.id}:unavailable`])
    batch.text = original
    expect(describeRows(await h.runtime.listChildren(parent.id))).toEqual([
      `${good.id}:inactive:one-shot:good`,
      `${bad.id}:inactive:one-shot:bad`,
    ])
  })

  it('bounds cold reads to four at a time by default', async () => {
    const probe = queryProbe()
    const h = await host({ query: probe.wrap })
    const parent = h.sessions.create()
    const handles = Array.from({ length: 10 }, (_, i) => h.runtime.spawn(parent, { mode: 'one-shot', label: `c${i}`, context: 'fresh' }))
    await Promise.all(handles.map((x) => x.done))
    probe.beforeObserve = () => new Promise((resolve) => setTimeout(resolve, 10))
    const rows = await h.runtime.listChildren(parent.id)
    expect(rows).toHaveLength(10)
    expect(probe.calls.observeSession).toBe(10)
    expect(DEFAULT_COLD_READ_CONCURRENCY).toBe(4)
    expect(probe.maxInFlight).toBe(4)
  })
})

describe('listChildren: the lifecycle witness', () => {
  const secret = 'SECRET-OF-THE-NEW-OWNER'
  const changed: Record<(typeof SESSION_HEADER_WITNESS_FIELDS)[number], (h: SessionHeader) => unknown> = {
    version: () => 2,
    id: (h) => `${h.id}-other`,
    createdAt: (h) => h.createdAt + 1,
    cwd: () => '/somewhere/else',
    parentSession: () => 'another-parent',
    isSeeded: (h) => !h.isSeeded,
    delegationDepth: (h) => h.delegationDepth + 1,
    origin: () => undefined,
    agentPreset: () => 'other-preset',
  }

  it('covers every header field', () => {
    expect(Object.keys(changed).sort()).toEqual([...SESSION_HEADER_WITNESS_FIELDS].sort())
  })

  it.each(SESSION_HEADER_WITNESS_FIELDS.map((field) => [field]))(
    'degrades to corrupt when the observed %s differs from the enumerated one, leaking nothing',
    async (field) => {
      const probe = queryProbe()
      const h = await host({ query: probe.wrap })
      const parent = h.sessions.create()
      const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'old-owner', context: 'fresh' })
      await child.done
      // The observation answers for another lifecycle of the same id: another header, another descriptor.
      probe.mapObservation = (_id, observation) => {
        const header = { ...observation.header, [field]: changed[field](observation.header) } as SessionHeader
        const events = observation.events.map((e) =>
          e.type === 'subagent/descriptor' ? { ...e, data: { ...descriptor('continuable', secret) } } : e,
        )
        return { ...observation, header, events }
      }
      const rows = await h.runtime.listChildren(parent.id)
      expect(rows).toEqual([{ kind: 'diagnostic', id: child.id, reason: 'corrupt' }])
      expect(JSON.stringify(rows)).not.toContain(secret)
    },
  )

  it('catches a real delete-and-republish between enumeration and the cold read', async () => {
    const probe = queryProbe()
    const h = await host({ query: probe.wrap })
    const parent = h.sessions.create()
    const stranger = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'one-shot', label: 'old-owner', context: 'fresh', id: 'reused' })
    await child.done
    probe.beforeObserve = async (id) => {
      probe.beforeObserve = undefined
      await h.persistence!.delete(id as never)
      const reborn = h.sessions.create({ id, origin: 'subagent', parentSession: stranger.id, delegationDepth: 1, cwd: '/new' })
      reborn.append('subagent/descriptor', descriptor('continuable', secret))
      await h.sessions.dispose(id)
    }
    const rows = await h.runtime.listChildren(parent.id)
    expect(rows).toEqual([{ kind: 'diagnostic', id: 'reused', reason: 'corrupt' }])
    expect(JSON.stringify(rows)).not.toContain(secret)
    // The next listing sees the republished corpus: the id now belongs to the stranger.
    expect(await h.runtime.listChildren(parent.id)).toEqual([])
    expect(describeRows(await h.runtime.listChildren(stranger.id))).toEqual([`reused:inactive:continuable:${secret}`])
  })
})

describe('listChildren: enumeration', () => {
  it('orders by createdAt, then id, and marks children that have subagents of their own', async () => {
    const h = await host()
    const parent = h.sessions.create()
    const at = parent.header.createdAt + 100
    const build = (c: Session) => c.append('subagent/descriptor', descriptor('one-shot'))
    await settledChild(h, parent, build, { id: 'b', createdAt: at })
    await settledChild(h, parent, build, { id: 'a', createdAt: at })
    await settledChild(h, parent, build, { id: 'c', createdAt: at - 1 })
    const b = h.sessions.restore(await h.persistence!.load('b' as never))
    await settledChild(h, b, build, { id: 'grandchild' })
    await h.sessions.dispose('b')
    expect(describeRows(await h.runtime.listChildren(parent.id))).toEqual([
      'c:inactive:one-shot:-',
      'a:inactive:one-shot:-',
      'b:inactive:one-shot:-:+',
    ])
  })

  it('answers hasChildren for many children from one listing of their own children', async () => {
    const probe = queryProbe()
    const h = await host({ query: probe.wrap })
    const parent = h.sessions.create()
    const build = (c: Session) => c.append('subagent/descriptor', descriptor('one-shot'))
    const ids: string[] = []
    for (let i = 0; i < 12; i++) ids.push(await settledChild(h, parent, build))
    const middle = h.sessions.restore(await h.persistence!.load(ids[5] as never))
    await settledChild(h, middle, build)
    await h.sessions.dispose(middle.id)
    probe.calls.listSessions = 0
    const rows = await h.runtime.listChildren(parent.id)
    expect(rows.map((r) => r.kind === 'child' && r.hasChildren)).toEqual(ids.map((id) => id === ids[5]))
    expect(probe.calls.listSessions).toBe(2)
  })

  it('prefers the live header over the listed one without a consistency check (recorded deviation)', async () => {
    const probe = queryProbe()
    const hold = gate()
    const h = await host({ query: probe.wrap, driver: createScriptedDriver(holdScript(hold.promise)) })
    const parent = h.sessions.create()
    const first = h.runtime.spawn(parent, { mode: 'one-shot', label: 'first', context: 'fresh' })
    const second = h.runtime.spawn(parent, { mode: 'one-shot', label: 'second', context: 'fresh' })
    await new Promise((resolve) => setTimeout(resolve, 5))
    // The corpus claims the first child was created last and belongs elsewhere; the live header says otherwise.
    probe.mapRecords = (records) =>
      records.map((r) => (r.header.id === first.id ? { ...r, header: { ...r.header, createdAt: r.header.createdAt + 10_000 } } : r))
    expect(describeRows(await h.runtime.listChildren(parent.id))).toEqual([
      `${first.id}:running:one-shot:first`,
      `${second.id}:running:one-shot:second`,
    ])
    hold.open()
    await Promise.all([first.done, second.done])
  })

  it('bounds cold reads to the configured coldReadConcurrency', async () => {
    const probe = queryProbe()
    const h = await host({ query: probe.wrap, coldReadConcurrency: 7 })
    const parent = h.sessions.create()
    const handles = Array.from({ length: 12 }, (_, i) => h.runtime.spawn(parent, { mode: 'one-shot', label: `c${i}`, context: 'fresh' }))
    await Promise.all(handles.map((x) => x.done))
    probe.beforeObserve = () => new Promise((resolve) => setTimeout(resolve, 10))
    expect(await h.runtime.listChildren(parent.id)).toHaveLength(12)
    expect(probe.maxInFlight).toBe(7)
  })

  it('returns an empty list for an unknown parent (recorded deviation: empty rather than not-found)', async () => {
    const h = await host()
    expect(await h.runtime.listChildren('no-such-parent')).toEqual([])
  })

  it("fails the whole listing with the query's own error when the corpus cannot be enumerated", async () => {
    const storage = new MemoryPersistenceStorage()
    const h = await host({ storage })
    const parent = h.sessions.create()
    await h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh' }).done
    for (const log of storage.logs.values()) (log as { headerLine: string }).headerLine = '{'
    expect(await codeOf(h.runtime.listChildren(parent.id))).toBe('SESSION_QUERY_PERSISTENCE_FAILED')
  })
})

describe('listChildren: required services', () => {
  it.each([
    ['sessionProjections', 'SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE'],
    ['sessionQuery', 'SUBAGENT_CONTROL_QUERY_UNAVAILABLE'],
  ] as const)('fails without %s even when there are no children (standalone use)', async (missing, code) => {
    const h = await host()
    const services = {
      sessions: h.sessions,
      sessionProjections: h.projections,
      sessionQuery: h.ctx.require('sessionQuery'),
      [missing]: undefined,
    }
    expect(await codeOf(listChildren(services, 'anyone'))).toBe(code)
    expect(await codeOf(listDescendants(services, 'anyone'))).toBe(code)
  })

  it('names the session store when only it is missing, and an unregistered unit as missing projections', async () => {
    const h = await host()
    const services = { sessionProjections: h.projections, sessionQuery: h.ctx.require('sessionQuery') }
    expect(await codeOf(listChildren({ ...services, sessions: undefined }, 'anyone'))).toBe('SUBAGENT_CONTROL_SESSION_STORE_UNAVAILABLE')
    const bare = await host({ subagents: false })
    expect(
      await codeOf(
        listChildren(
          { sessions: bare.sessions, sessionProjections: bare.projections, sessionQuery: bare.ctx.require('sessionQuery') },
          'anyone',
        ),
      ),
    ).toBe('SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE')
  })
})

describe('listChildren: cancellation', () => {
  async function coldFamily(probe = queryProbe()) {
    const h = await host({ query: probe.wrap })
    const parent = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh' })
    await child.done
    return { h, parent, probe }
  }

  it('rejects an already aborted signal before reading anything', async () => {
    const { h, parent, probe } = await coldFamily()
    probe.calls.listSessions = 0
    expect(await codeOf(h.runtime.listChildren(parent.id, AbortSignal.abort()))).toBe('CANCELLED')
    expect(probe.calls.listSessions).toBe(0)
  })

  it('rejects as soon as the signal aborts during a cold read', async () => {
    const { h, parent, probe } = await coldFamily()
    const controller = new AbortController()
    const stall = gate()
    probe.beforeObserve = () => {
      controller.abort()
      return stall.promise
    }
    expect(await codeOf(h.runtime.listChildren(parent.id, controller.signal))).toBe('CANCELLED')
    stall.open()
  })

  it('rejects a cold read that settles only after the abort', async () => {
    const { h, parent, probe } = await coldFamily()
    const controller = new AbortController()
    probe.afterObserve = () => controller.abort()
    expect(await codeOf(h.runtime.listChildren(parent.id, controller.signal))).toBe('CANCELLED')
  })

  it('rejects when the abort lands during enumeration', async () => {
    const { h, parent, probe } = await coldFamily()
    const controller = new AbortController()
    probe.afterList = () => controller.abort()
    expect(await codeOf(h.runtime.listChildren(parent.id, controller.signal))).toBe('CANCELLED')
    expect(probe.calls.observeSession).toBe(0)
  })
})

describe('listDescendants', () => {
  it('lists the whole subtree depth-first in listing order, with parent and depth', async () => {
    const h = await host()
    const root = h.sessions.create()
    const build = (label: string) => (c: Session) => c.append('subagent/descriptor', descriptor('one-shot', label))
    const a = await settledChild(h, root, build('a'), { id: 'a' })
    const b = await settledChild(h, root, build('b'), { id: 'b' })
    const aLive = h.sessions.restore(await h.persistence!.load(a as never))
    const a1 = await settledChild(h, aLive, build('a1'), { id: 'a1' })
    const a1Live = h.sessions.restore(await h.persistence!.load(a1 as never))
    await settledChild(h, a1Live, build('a1x'), { id: 'a1x' })
    await settledChild(h, aLive, (c) => completedTurn(c, 1), { id: 'a2' })
    await h.sessions.dispose(a1Live.id)
    await h.sessions.dispose(aLive.id)
    const explained = await h.runtime.explainDescendants(root.id)
    expect(explained.map((e) => [e.row.id, e.parentId, e.depth, e.row.kind === 'child' ? e.row.hasChildren : e.row.reason])).toEqual([
      ['a', root.id, 1, true],
      ['a1', 'a', 2, true],
      ['a1x', 'a1', 3, false],
      ['a2', 'a', 2, 'corrupt'],
      ['b', root.id, 1, false],
    ])
    expect(await h.runtime.listDescendants(root.id)).toEqual(explained.map((e) => e.row))
    expect(describeRows(await h.runtime.listDescendants('a1'))).toEqual(['a1x:inactive:one-shot:a1x'])
    expect(b).toBe('b')
  })

  it('reaches subagents through ordinary (non-subagent) sessions in between: an ordinary fork of the root, and of a subagent', async () => {
    const h = await host()
    const root = h.sessions.create({ id: 'root' })
    completedTurn(root, 1)
    await h.runtime.spawn(root, { mode: 'one-shot', label: 'direct', context: 'fresh', id: 'direct' }).done
    // An ordinary fork of the root (no origin: not a subagent) that delegates on its own.
    const side = h.sessions.fork(root, { childId: 'side' })
    await h.runtime.spawn(side, { mode: 'continuable', label: 'via side', context: 'fork', id: 'via-side' }).done
    // An ordinary fork of a subagent, which delegates too (two ordinary links deep below the root).
    const viaSide = h.sessions.restore(await h.persistence!.load('via-side' as never))
    const branch = h.sessions.fork(viaSide, { childId: 'branch', delegationDepth: 1 })
    await h.runtime.spawn(branch, { mode: 'one-shot', label: 'deep', context: 'fresh', id: 'deep' }).done
    await h.sessions.dispose(branch.id)
    await h.sessions.dispose(viaSide.id)
    await h.sessions.dispose(side.id)
    const explained = await h.runtime.explainDescendants(root.id)
    expect(explained.map((e) => [e.row.id, e.parentId, e.depth, e.row.kind === 'child' ? e.row.label : e.row.reason])).toEqual([
      ['direct', 'root', 1, 'direct'],
      ['via-side', 'side', 2, 'via side'],
      ['deep', 'branch', 4, 'deep'],
    ])
    // The ordinary sessions get no row, and the direct catalog is unchanged by them.
    expect(describeRows(await h.runtime.listChildren(root.id))).toEqual(['direct:inactive:one-shot:direct'])
    expect((await h.runtime.listDescendants('side')).map((row) => row.id)).toEqual(['via-side', 'deep'])
  })
})
