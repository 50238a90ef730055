import type { StoredSessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { createScriptedDriver, type SubagentNotice, type SubagentRun } from '../src/index.js'
import { gate, type Host, hostsPerTest } from './helpers.js'

const hosts = hostsPerTest()

/**
 * A host whose children act by label: `g…` (grandchildren) hold their turn
 * until their gate opens, `child` answers `spawned` on its spawn run and,
 * woken later, names the settlements it was woken with. `reader` makes one
 * scripted tool call (a `tool/result`) after `readerGate` and then a model
 * call (`step`): a notice that lands before the gate opens is in that call.
 */
async function family() {
  const gates = new Map([
    ['g1', gate()],
    ['g2', gate()],
  ])
  const readerGate = gate()
  const runs: SubagentRun[] = []
  const scripted = createScriptedDriver((run) => {
    const label = run.identity?.label ?? ''
    const held = gates.get(label)
    if (held !== undefined)
      return [
        { kind: 'until', promise: held.promise },
        { kind: 'message', text: `${label} done` },
      ]
    if (label === 'reader' && run.kind === 'spawn')
      return [
        { kind: 'until', promise: readerGate.promise },
        { kind: 'tool', name: 'look' },
        { kind: 'step' },
        { kind: 'message', text: 'read it' },
      ]
    if (run.kind === 'spawn' || run.kind === 'resume')
      return [{ kind: 'message', text: run.prompt === undefined ? 'spawned' : `on: ${run.prompt}` }]
    return [{ kind: 'message', text: `woken by ${run.notices.map((n) => (n.kind === 'settled' ? n.text : n.kind)).join(', ')}` }]
  })
  const h = await hosts.open({
    driver: {
      name: 'scripted',
      run(run) {
        runs.push(run)
        return scripted.run(run)
      },
    },
  })
  const parent = h.sessions.create({ id: 'parent' })
  return { h, parent, gates, readerGate, runs }
}

function spawnUnder(h: Host, parentId: string, label: string, mode: 'one-shot' | 'continuable' = 'continuable') {
  return h.runtime.spawn(h.sessions.get(parentId)!, { mode, label, context: 'fresh', id: label })
}

async function ownEvents(h: Host, id: string): Promise<StoredSessionEvent[]> {
  const live = h.sessions.get(id)
  if (live !== undefined) return live.events.slice(live.inheritedEventCount)
  const stored = await h.persistence!.inspect(id as never)
  return stored.events.slice(stored.inheritedEventCount)
}

const ofType = (events: readonly StoredSessionEvent[], type: string) => events.filter((e) => e.type === type)
const noticesOn = (events: readonly StoredSessionEvent[]) => ofType(events, 'subagent/notice').map((e) => e.data as SubagentNotice)
const lastEnd = async (h: Host, id: string) => ofType(await ownEvents(h, id), 'subagent/end').at(-1)?.data

describe('a continuable child waits for subagents of its own', () => {
  it("stays live and busy after its turn; the grandchild's settlement wakes it for a new run, whose notice reaches the parent", async () => {
    const { h, parent, gates, runs } = await family()
    const child = spawnUnder(h, 'parent', 'child')
    spawnUnder(h, 'child', 'g1')
    expect((await child.done).end).toBe('completed')
    expect(h.runtime.isWaiting('child')).toBe(true)
    expect(h.runtime.isRunning('child')).toBe(false)
    expect(h.sessions.get('child')).toBeDefined()
    expect(noticesOn(parent.events)).toEqual([
      { kind: 'settled', child: 'child', mode: 'continuable', label: 'child', reason: 'completed', text: 'spawned', waiting: true },
    ])

    gates.get('g1')!.open()
    await h.runtime.wait(['child'], { caller: parent })
    expect(h.runtime.isWaiting('child')).toBe(false)
    // The child's chain is over: it went cold, and its log shows the woken run.
    expect(h.sessions.get('child')).toBeUndefined()
    const own = await ownEvents(h, 'child')
    const grandNotice = ofType(own, 'subagent/notice')[0]!
    expect(grandNotice.data).toMatchObject({ kind: 'settled', child: 'g1', reason: 'completed', text: 'g1 done' })
    expect(ofType(own, 'subagent/start').map((e) => e.data)).toEqual([
      { kind: 'spawn', turn: 1 },
      { kind: 'message', turn: 2, notice: grandNotice.seq },
    ])
    expect(ofType(own, 'subagent/end').map((e) => e.data)).toEqual([
      { turn: 1, reason: 'completed', text: 'spawned' },
      { turn: 2, reason: 'completed', text: 'woken by g1 done' },
    ])
    expect(runs.filter((run) => run.session.id === 'child').map((run) => [run.kind, run.prompt])).toEqual([
      ['spawn', undefined],
      ['message', undefined],
    ])
    expect(noticesOn(parent.events).map((n) => (n.kind === 'settled' ? [n.text, n.waiting] : n.kind))).toEqual([
      ['spawned', true],
      ['woken by g1 done', undefined],
    ])
    expect(await lastEnd(h, 'g1')).toMatchObject({ reason: 'completed' })
  })

  it('takes one run per settlement, in the order they arrive; a send while it waits starts a run at once', async () => {
    const { h, parent, gates } = await family()
    const child = spawnUnder(h, 'parent', 'child')
    spawnUnder(h, 'child', 'g1')
    spawnUnder(h, 'child', 'g2')
    await child.done
    const secondNotice = nextNotice(h, 'parent')
    gates.get('g2')!.open()
    expect(await secondNotice).toMatchObject({ child: 'child', text: 'woken by g2 done', waiting: true })
    expect(h.runtime.isWaiting('child')).toBe(true)

    expect(await h.runtime.send('child', { caller: parent, text: 'status?' })).toMatchObject({ status: 'started' })
    expect(await nextNotice(h, 'parent')).toMatchObject({ child: 'child', text: 'on: status?', waiting: true })

    gates.get('g1')!.open()
    await h.runtime.wait(['child'], { caller: parent })
    const own = await ownEvents(h, 'child')
    const [n2, n1] = ofType(own, 'subagent/notice')
    expect(ofType(own, 'subagent/start').map((e) => e.data)).toEqual([
      { kind: 'spawn', turn: 1 },
      { kind: 'message', turn: 2, notice: n2!.seq },
      { kind: 'resume', turn: 3 },
      { kind: 'message', turn: 4, notice: n1!.seq },
    ])
    expect(noticesOn(parent.events).map((n) => n.kind === 'settled' && n.text)).toEqual([
      'spawned',
      'woken by g2 done',
      'on: status?',
      'woken by g1 done',
    ])
  })

  it('is not woken for a settlement its last model call already read; it is for one that landed after', async () => {
    const { h, parent, gates, readerGate, runs } = await family()
    const reader = spawnUnder(h, 'parent', 'reader')
    spawnUnder(h, 'reader', 'g1')
    spawnUnder(h, 'reader', 'g2')
    const first = nextNotice(h, 'reader')
    gates.get('g1')!.open()
    await first
    // g1's settlement lands before the reader's tool result and its model call: that call read it.
    readerGate.open()
    await reader.done
    expect(h.runtime.isWaiting('reader')).toBe(true)
    gates.get('g2')!.open()
    await h.runtime.wait(['reader'], { caller: parent })
    expect(runs.filter((run) => run.session.id === 'reader').map((run) => run.kind)).toEqual(['spawn', 'message'])
    const own = await ownEvents(h, 'reader')
    const g2 = ofType(own, 'subagent/notice').find((e) => (e.data as SubagentNotice).child === 'g2')!
    expect(ofType(own, 'subagent/start').at(-1)!.data).toEqual({ kind: 'message', turn: 2, notice: g2.seq })
  })

  it('a bound still applies to a woken run: with its turn budget spent, it ends budget at once', async () => {
    const { h, parent, gates, runs } = await family()
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'child', context: 'fresh', id: 'child', settings: { maxTurns: 2 } })
    spawnUnder(h, 'child', 'g1')
    await child.done
    gates.get('g1')!.open()
    await h.runtime.wait(['child'], { caller: parent })
    expect(await lastEnd(h, 'child')).toMatchObject({ turn: 2, reason: 'budget', exceeded: { kind: 'turns' } })
    expect(runs.filter((run) => run.session.id === 'child')).toHaveLength(1)
  })
})

describe('a stopped chain still drains its subagents', () => {
  for (const [how, stop] of [
    ['close', (h: Host) => h.runtime.close('child', { caller: 'parent' })],
    ['a drain from above (release)', (h: Host) => h.runtime.release('parent')],
    ['disposal', (h: Host) => h.runtime.dispose()],
  ] as const) {
    it(`${how} of a waiting child drains the grandchild and ends its chain`, async () => {
      const { h, runs } = await family()
      const child = spawnUnder(h, 'parent', 'child')
      spawnUnder(h, 'child', 'g1')
      await child.done
      expect(h.runtime.isWaiting('child')).toBe(true)
      await stop(h)
      expect(h.runtime.isWaiting('child')).toBe(false)
      expect(h.runtime.isRunning('child')).toBe(false)
      expect(await lastEnd(h, 'g1')).toMatchObject({ reason: 'drained' })
      expect(runs.filter((run) => run.session.id === 'child')).toHaveLength(1)
      if (how === 'close') expect(await lastEnd(h, 'child')).toEqual({ reason: 'closed' })
    })
  }

  it('a parking interrupt of the running child drains the grandchild; so does a one-shot child answering', async () => {
    const { h, parent, gates } = await family()
    gates.set('child', gate())
    const child = spawnUnder(h, 'parent', 'child')
    spawnUnder(h, 'child', 'g1')
    expect(await h.runtime.interrupt('child', { caller: parent, queued: 'park' })).toBe(true)
    expect((await child.done).end).toBe('cancelled')
    await h.runtime.wait(['child'], { caller: parent })
    expect(await lastEnd(h, 'g1')).toMatchObject({ reason: 'drained' })

    const once = spawnUnder(h, 'parent', 'once', 'one-shot')
    spawnUnder(h, 'once', 'g2')
    expect((await once.done).end).toBe('completed')
    await h.runtime.wait(['once'], { caller: parent })
    expect(await lastEnd(h, 'g2')).toMatchObject({ reason: 'drained' })
    expect(noticesOn(parent.events).find((n) => n.kind === 'settled' && n.child === 'once')).not.toHaveProperty('waiting')
  })
})

/** The next `subagent/notice` appended to session `id`. */
function nextNotice(h: Host, id: string): Promise<SubagentNotice> {
  return new Promise((resolve) => {
    const off = h.ctx.on('session/event', (session, event) => {
      if (session.id !== id || event.type !== 'subagent/notice') return
      off()
      resolve(event.data as SubagentNotice)
    })
  })
}
