import type { Session } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { createScriptedDriver, type SubagentListEntry } from '../src/index.js'
import { type Host, hostsPerTest } from './helpers.js'

/**
 * A continuable descriptor as the harness writes it, from its documented
 * ContinuableSubagentDescriptorData fields: version, mode, provider, label,
 * agentProvider?, agentModel?, persona?, toolFilter? ({ allow?, deny? }).
 * The harness's one-shot carries only version, mode, provider, label?.
 */
const harnessContinuable = {
  version: 2,
  mode: 'continuable',
  provider: 'inprocess',
  label: 'code reviewer',
  agentProvider: 'deepseek',
  agentModel: 'deepseek-reasoner',
  persona: 'You review patches for correctness and style.',
  toolFilter: { allow: ['read_file', 'grep'], deny: ['bash'] },
}
const harnessOneShot = { version: 2, mode: 'one-shot', provider: 'claude-code', label: 'summarize logs' }

const hosts = hostsPerTest()

/**
 * A child of `parent` with `payload` as its descriptor, cold (persisted, out
 * of memory) unless `live`. `inTurn` writes it the way the harness does:
 * inside the first turn, after `turn/start`.
 */
async function childWith(h: Host, parent: Session, id: string, payload: unknown, live = false, inTurn = false): Promise<void> {
  const child = h.sessions.create({ id, origin: 'subagent', parentSession: parent.id, delegationDepth: 1 })
  if (inTurn) child.append('turn/start', { turn: 1 })
  child.append('subagent/descriptor', payload)
  if (!inTurn) child.append('turn/start', { turn: 1 })
  if (!live) {
    child.append('turn/end', { turn: 1, reason: 'completed' })
    await h.sessions.dispose(id)
  }
}

function rowsById(rows: readonly SubagentListEntry[]): Record<string, unknown> {
  return Object.fromEntries(rows.map(({ id, ...rest }) => [id, rest]))
}

describe("descriptors in the harness's shape", () => {
  it('list as child rows with their labels (cold and live), and malformed ones still as corrupt', async () => {
    const h = await hosts.open()
    const parent = h.sessions.create({ id: 'parent' })
    await childWith(h, parent, 'h-continuable', harnessContinuable)
    await childWith(h, parent, 'h-deny-only', { ...harnessContinuable, label: 'deny only', toolFilter: { deny: ['bash'] } })
    await childWith(h, parent, 'h-one-shot', harnessOneShot)
    await childWith(h, parent, 'h-one-shot-empty', { ...harnessOneShot, label: '' }, false, true)
    await childWith(h, parent, 'h-empty-label', { ...harnessContinuable, label: '' })
    await childWith(h, parent, 'h-live', harnessContinuable, true)
    await childWith(h, parent, 'h-live-in-turn', harnessOneShot, true, true)
    // What makes a descriptor corrupt: version, mode, label, a key its mode does not have, a field of the wrong shape.
    await childWith(h, parent, 'x-output', { version: 2, mode: 'one-shot', provider: 'p', outputSchema: { type: 'object' } })
    await childWith(h, parent, 'x-one-shot-persona', { ...harnessOneShot, persona: 'terse' })
    await childWith(h, parent, 'x-version', { ...harnessContinuable, version: 3 })
    await childWith(h, parent, 'x-mode', { ...harnessContinuable, mode: 'forever' })
    const { label: _label, ...withoutLabel } = harnessContinuable
    await childWith(h, parent, 'x-no-label', withoutLabel)
    await childWith(h, parent, 'x-unknown-key', { ...harnessContinuable, colour: 'red' })
    await childWith(h, parent, 'x-empty-filter', { ...harnessContinuable, toolFilter: {} })
    await childWith(h, parent, 'x-filter-type', { ...harnessContinuable, toolFilter: { allow: 'read_file' } })
    await childWith(h, parent, 'x-model-type', { ...harnessContinuable, agentModel: 7 })
    await childWith(h, parent, 'x-persona-type', { ...harnessContinuable, persona: ['a'] })
    await childWith(h, parent, 'x-live', { ...harnessContinuable, toolFilter: { only: [] } }, true)
    await childWith(h, parent, 'x-live-in-turn', { ...harnessOneShot, version: 'two' }, true, true)
    expect(rowsById(await h.runtime.listChildren(parent.id))).toEqual({
      'h-continuable': { kind: 'child', activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'code reviewer' },
      'h-deny-only': { kind: 'child', activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'deny only' },
      'h-one-shot': { kind: 'child', activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'summarize logs' },
      'h-one-shot-empty': { kind: 'child', activity: 'inactive', hasChildren: false, mode: 'one-shot', label: '' },
      'h-empty-label': { kind: 'child', activity: 'inactive', hasChildren: false, mode: 'continuable', label: '' },
      'h-live': { kind: 'child', activity: 'running', hasChildren: false, mode: 'continuable', label: 'code reviewer' },
      'h-live-in-turn': { kind: 'child', activity: 'running', hasChildren: false, mode: 'one-shot', label: 'summarize logs' },
      'x-output': { kind: 'diagnostic', reason: 'corrupt' },
      'x-one-shot-persona': { kind: 'diagnostic', reason: 'corrupt' },
      'x-version': { kind: 'diagnostic', reason: 'corrupt' },
      'x-mode': { kind: 'diagnostic', reason: 'corrupt' },
      'x-no-label': { kind: 'diagnostic', reason: 'corrupt' },
      'x-unknown-key': { kind: 'diagnostic', reason: 'corrupt' },
      'x-empty-filter': { kind: 'diagnostic', reason: 'corrupt' },
      'x-filter-type': { kind: 'diagnostic', reason: 'corrupt' },
      'x-model-type': { kind: 'diagnostic', reason: 'corrupt' },
      'x-persona-type': { kind: 'diagnostic', reason: 'corrupt' },
      // A poisoned running child is corrupt, not omitted, wherever its descriptor sits.
      'x-live': { kind: 'diagnostic', reason: 'corrupt' },
      'x-live-in-turn': { kind: 'diagnostic', reason: 'corrupt' },
    })
  })

  it('a harness continuable child is resumable, and its persona and toolFilter reach the driver', async () => {
    const seen: { persona?: string; tools: string[] }[] = []
    const tool = (name: string) => ({ name, description: name, jsonSchema: {}, execute: async () => ({ text: name }) })
    const scripted = createScriptedDriver()
    const h = await hosts.open({
      driver: {
        name: 'd',
        run(run) {
          seen.push({
            ...(run.settings?.persona === undefined ? {} : { persona: run.settings.persona }),
            tools: run.tools.map((t) => t.name),
          })
          return scripted.run(run)
        },
      },
      tools: () => [tool('read_file'), tool('grep'), tool('bash'), tool('write_file')],
    })
    const parent = h.sessions.create({ id: 'parent' })
    await childWith(h, parent, 'h', harnessContinuable)
    const handle = await h.runtime.resume('h', { caller: parent, prompt: 'again' })
    expect((await handle.done).end).toBe('completed')
    expect(seen).toEqual([{ persona: harnessContinuable.persona, tools: ['read_file', 'grep'] }])
  })

  it('keeps the creation window: a running child without its own descriptor yet is omitted', async () => {
    const h = await hosts.open()
    const parent = h.sessions.create({ id: 'parent' })
    h.sessions.create({ id: 'starting', origin: 'subagent', parentSession: parent.id, delegationDepth: 1 })
    expect(await h.runtime.listChildren(parent.id)).toEqual([])
  })
})
