import { describe, expect, it } from 'vitest'
import { createScriptedDriver } from '../src/index.js'
import { bodyReads, hostsPerTest } from './helpers.js'

const { open: host } = hostsPerTest()

const reply = () => createScriptedDriver(() => [{ kind: 'message', text: 'kid reply' }])

describe('a closed child is closed wherever it is read', () => {
  it('wait reports closed for a child closed after its run settled here, not the run it settled before', async () => {
    const h = await host({ driver: reply() })
    const parent = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'a', context: 'fresh', prompt: 'go' })
    await child.done
    expect(await h.runtime.wait([child.id], { caller: parent })).toEqual([
      { id: child.id, state: 'settled', reason: 'completed', text: 'kid reply' },
    ])
    expect(h.sessions.get(child.id)).toBeUndefined() // cold: the close loads it, writes the end and lets it go
    await h.runtime.close(child.id, { caller: parent })
    expect(await h.runtime.wait([child.id], { caller: parent })).toEqual([{ id: child.id, state: 'closed' }])
  })

  it('a cold catalog entry says closed, from the one read its row already takes', async () => {
    const h = await host({ driver: reply() })
    const parent = h.sessions.create()
    const closed = h.runtime.spawn(parent, { mode: 'continuable', label: 'closed', context: 'fresh', prompt: 'go' })
    const open = h.runtime.spawn(parent, { mode: 'continuable', label: 'open', context: 'fresh', prompt: 'go' })
    await Promise.all([closed.done, open.done])
    await h.runtime.close(closed.id, { caller: parent })
    const reads = bodyReads(h)
    const entries = await h.runtime.explainChildren(parent.id)
    expect(bodyReads(h) - reads).toBe(2) // one per cold child, as without the mark
    const byId = new Map(entries.map((entry) => [entry.row.id as string, entry]))
    // The row keeps the note's shape: the mark is the entry's, beside it.
    expect(byId.get(closed.id)).toMatchObject({
      rung: 3,
      closed: true,
      row: { kind: 'child', id: closed.id, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'closed' },
    })
    expect(Object.keys(byId.get(closed.id)!.row).sort()).toEqual(['activity', 'hasChildren', 'id', 'kind', 'label', 'mode'])
    expect(byId.get(open.id)).toMatchObject({ rung: 3, closed: false })
  })

  it('a live closed child (no persistence to go cold in) says closed from the watermark snapshot', async () => {
    const h = await host({ driver: reply(), persistence: false })
    const parent = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'a', context: 'fresh', prompt: 'go' })
    await child.done
    expect((await h.runtime.explainChildren(parent.id))[0]).toMatchObject({ rung: 1, closed: false })
    await h.runtime.close(child.id, { caller: parent })
    expect(h.sessions.get(child.id)).toBe(child.session)
    const reads = bodyReads(h)
    expect((await h.runtime.explainChildren(parent.id))[0]).toMatchObject({ rung: 1, closed: true, row: { activity: 'running' } })
    expect(bodyReads(h) - reads).toBe(0)
    expect(await h.runtime.wait([child.id], { caller: parent })).toEqual([{ id: child.id, state: 'closed' }])
  })
})
