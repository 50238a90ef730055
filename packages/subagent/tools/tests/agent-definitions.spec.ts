import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { agentDefinitions } from '@dsh/agent-definitions'
import type { Context } from '@dsh/context'
import type { Session } from '@dsh/session'
import { createScriptedDriver, type SubagentRun, type SubagentRuntime, subagentsPlugin } from '@dsh/subagent'
import { afterEach, describe, expect, it } from 'vitest'
import { type AgentDefinitionSource, type SubagentControlTool, subagentControlTools } from '../src/index.js'
import { storeContext } from './support.js'

let ctx: Context | undefined
const cleanups: (() => void)[] = []
afterEach(async () => {
  await ctx?.dispose()
  ctx = undefined
  for (const cleanup of cleanups.splice(0)) cleanup()
})

const REVIEWER = [
  '---',
  'name: reviewer',
  'description: Reviews a diff.',
  'provider: anthropic',
  'model: claude-sonnet-4-5',
  'tools: [report, list_agents, send_message]',
  'budgets:',
  '  maxTokens: 5000',
  '  maxTurns: 2',
  '---',
  'Point at the line; say why it is wrong.',
  '',
].join('\n')

/** A root and a project with agents directories, and what each child run saw. */
async function setup(): Promise<{
  runtime: SubagentRuntime
  parent: Session
  root: string
  project: string
  runs: SubagentRun[]
  subagent(agents?: AgentDefinitionSource): SubagentControlTool
  childIds(): Promise<string[]>
}> {
  const temp = mkdtempSync(join(tmpdir(), 'dsh-tool-agents-'))
  cleanups.push(() => rmSync(temp, { recursive: true, force: true }))
  const root = join(temp, 'root')
  const project = join(temp, 'project')
  mkdirSync(join(root, '.dsh', 'agents'), { recursive: true })
  mkdirSync(join(project, '.dsh', 'agents'), { recursive: true })
  ctx = await storeContext()
  const runs: SubagentRun[] = []
  const driver = createScriptedDriver((run) => {
    runs.push(run)
    // A child started from 'spender' spends ten tokens in each model step.
    if (run.session.header.agentPreset === 'spender')
      return [
        { kind: 'step', usage: { input: 5, output: 5 } },
        { kind: 'step', usage: { input: 5, output: 5 } },
        { kind: 'message', text: 'spent' },
      ]
    return [{ kind: 'message', text: `done: ${run.prompt ?? ''}` }]
  })
  await ctx.activate(subagentsPlugin({ driver, tools: (_agent, runtime) => subagentControlTools(runtime) }))
  const runtime = ctx.require('subagents')
  const parent = ctx.require('sessions').create({ id: 'parent' })
  const query = ctx.require('sessionQuery')
  return {
    runtime,
    parent,
    root,
    project,
    runs,
    subagent: (agents) => subagentControlTools(runtime, { filter: ['subagent'], ...(agents === undefined ? {} : { agents }) })[0]!,
    async childIds() {
      const page = await query.listSessions({})
      return page.records.map((record) => record.header.id).filter((id) => id !== parent.id)
    },
  }
}

async function failure(promise: Promise<unknown>): Promise<{ code: string; message: string; details?: unknown }> {
  try {
    await promise
  } catch (error) {
    return error as { code: string; message: string }
  }
  throw new Error('it resolved')
}

describe('subagent with agent: <name>', () => {
  it("applies the definition's instructions, provider, model, tools and budgets; the label defaults to its name", async () => {
    const s = await setup()
    writeFileSync(join(s.project, '.dsh', 'agents', 'reviewer.md'), REVIEWER)
    const tool = s.subagent(agentDefinitions({ root: s.root, project: s.project }))
    const result = (await tool.execute(
      { agent: 'reviewer', prompt: 'review the diff', mode: 'continuable', instructions: 'Only look at src/.' },
      { agent: s.parent },
    )) as unknown as { id: string; label: string; agent: string; status: string }
    expect(result).toMatchObject({ label: 'reviewer', agent: 'reviewer', status: 'running' })
    await s.runtime.wait([result.id], { caller: s.parent })
    const [run] = s.runs
    expect(run?.settings).toEqual({
      instructions: 'Point at the line; say why it is wrong.\n\nOnly look at src/.',
      agentProvider: 'anthropic',
      agentModel: 'claude-sonnet-4-5',
      toolFilter: { allow: ['report', 'list_agents', 'send_message'] },
      maxTokens: 5000,
      maxTurns: 2,
    })
    // The child is offered only the tools the definition allows, and its header names the definition.
    expect(run?.tools.map((t) => t.name).sort()).toEqual(['list_agents', 'report', 'send_message'])
    expect(run?.session.header.agentPreset).toBe('reviewer')
    expect(run?.descriptor).toMatchObject({ mode: 'continuable', label: 'reviewer', agentModel: 'claude-sonnet-4-5' })
  })

  it('inline tools may narrow the allow-list (a subset, or a deny), never widen it', async () => {
    const s = await setup()
    writeFileSync(join(s.root, '.dsh', 'agents', 'reviewer.md'), REVIEWER)
    const tool = s.subagent(agentDefinitions({ root: s.root, project: s.project }))
    await tool.execute({ agent: 'reviewer', prompt: 'a', tools: { allow: ['report'] } }, { agent: s.parent })
    await tool.execute({ agent: 'reviewer', prompt: 'b', tools: { deny: ['send_message'] } }, { agent: s.parent })
    expect(s.runs.map((run) => run.tools.map((t) => t.name).sort())).toEqual([['report'], ['list_agents', 'report']])
    expect(s.runs[1]?.settings?.toolFilter).toEqual({ allow: ['report', 'list_agents', 'send_message'], deny: ['send_message'] })

    const before = await s.childIds()
    const widened = await failure(
      tool.execute({ agent: 'reviewer', prompt: 'c', tools: { allow: ['report', 'subagent'] } }, { agent: s.parent }),
    )
    expect(widened.code).toBe('TOOL_SUBAGENT_CONTROL_INVALID_INPUT')
    expect(widened.message).toContain("agent 'reviewer' may only use report, list_agents, send_message; subagent would widen that")
    expect(await s.childIds()).toEqual(before)
  })

  it('a bad definition file is a typed error naming file and line, and no child session exists', async () => {
    const s = await setup()
    const dir = join(s.project, '.dsh', 'agents')
    writeFileSync(join(dir, 'typo.md'), REVIEWER.replaceAll('reviewer', 'typo').replace('model:', 'modle:'))
    writeFileSync(join(dir, 'wrong.md'), REVIEWER.replaceAll('reviewer', 'wrong').replace('maxTurns: 2', 'maxTurns: two'))
    writeFileSync(join(dir, 'yaml.md'), REVIEWER.replaceAll('reviewer', 'yaml').replace('provider: anthropic', 'provider: a: b'))
    const tool = s.subagent(agentDefinitions({ root: s.root, project: s.project }))
    const cases = [
      ['typo', 5, "unknown key 'modle'"],
      ['wrong', 9, "'budgets.maxTurns'"],
      ['yaml', 4, 'invalid YAML'],
    ] as const
    for (const [name, line, what] of cases) {
      for (const mode of ['one-shot', 'continuable'] as const) {
        const error = await failure(tool.execute({ agent: name, prompt: 'go', mode }, { agent: s.parent }))
        expect(error.code).toBe('AGENT_DEFINITION_INVALID')
        expect(error.message).toContain(`${join(dir, `${name}.md`)}:${line}: `)
        expect(error.message).toContain(what)
      }
    }
    expect(await s.childIds()).toEqual([])
    expect(s.runs).toEqual([])
    expect(await s.runtime.explainChildren(s.parent.id)).toEqual([])
  })

  it("the definition's budgets are enforced: a token budget ends the child 'budget'; an unpriceable cost budget starts nothing", async () => {
    const s = await setup()
    const dir = join(s.root, '.dsh', 'agents')
    writeFileSync(join(dir, 'spender.md'), '---\nname: spender\ndescription: spends\nbudgets:\n  maxTokens: 15\n---\nSpend.\n')
    writeFileSync(
      join(dir, 'priced.md'),
      '---\nname: priced\ndescription: costs\nmodel: unpriced-model\nbudgets:\n  maxCostUsd: 1\n---\nCost.\n',
    )
    const tool = s.subagent(agentDefinitions({ root: s.root }))
    const spent = (await tool.execute({ agent: 'spender', prompt: 'go' }, { agent: s.parent })) as unknown as { status: string }
    expect(spent.status).toBe('budget')
    const [child] = await s.childIds()
    expect(s.runs[0]?.session.events.find((event) => event.type === 'subagent/options')?.data).toMatchObject({ maxTokens: 15 })
    expect(child).toBeDefined()

    const unpriced = await failure(tool.execute({ agent: 'priced', prompt: 'go' }, { agent: s.parent }))
    expect(unpriced.code).toBe('SUBAGENT_BUDGET_UNPRICED')
    expect(await s.childIds()).toEqual([child])
  })

  it('a provider the driver does not speak, or a tool children are not offered, is AGENT_DEFINITION_UNSUPPORTED and starts nothing', async () => {
    const s = await setup()
    const dir = join(s.root, '.dsh', 'agents')
    writeFileSync(join(dir, 'reviewer.md'), REVIEWER)
    writeFileSync(
      join(dir, 'typo.md'),
      REVIEWER.replaceAll('reviewer', 'typo').replace('provider: anthropic\n', '').replace('report,', 'reprot,'),
    )
    writeFileSync(join(dir, 'misspelt.md'), '---\nname: misspelt\ndescription: d\ntools: [lst_agents]\n---\nGo.\n')
    const definitions = agentDefinitions({ root: s.root })
    const offers = { provider: 'openai', tools: ['subagent', 'send_message', 'report', 'list_agents'] }
    const tool = s.subagent({ get: (name, signal) => definitions.get(name, signal), offers })

    const provider = await failure(tool.execute({ agent: 'reviewer', prompt: 'go' }, { agent: s.parent }))
    expect(provider.code).toBe('AGENT_DEFINITION_UNSUPPORTED')
    expect(provider.message).toContain(`Agent 'reviewer' (${join(dir, 'reviewer.md')}) asks for provider 'anthropic'`)
    expect(provider.message).toContain("subagents here run on 'openai'")
    expect(provider.details).toMatchObject({ agent: 'reviewer', provider: 'anthropic', offered: 'openai' })

    for (const [name, unknown] of [
      ['typo', ['reprot']],
      ['misspelt', ['lst_agents']],
    ] as const) {
      for (const mode of ['one-shot', 'continuable'] as const) {
        const error = await failure(tool.execute({ agent: name, prompt: 'go', mode }, { agent: s.parent }))
        expect(error.code).toBe('AGENT_DEFINITION_UNSUPPORTED')
        expect(error.message).toContain(`lists tools its subagent would not be offered: ${unknown.join(', ')}`)
        expect(error.details).toMatchObject({ agent: name, unknownTools: unknown })
      }
    }
    expect(await s.childIds()).toEqual([])
    expect(s.runs).toEqual([])

    // What the offers allow starts as before; without offers nothing is checked.
    const matching = s.subagent({ get: (name, signal) => definitions.get(name, signal), offers: { ...offers, provider: 'anthropic' } })
    expect(
      ((await matching.execute({ agent: 'reviewer', prompt: 'go' }, { agent: s.parent })) as unknown as { status: string }).status,
    ).toBe('completed')
    expect(
      ((await s.subagent(definitions).execute({ agent: 'typo', prompt: 'go' }, { agent: s.parent })) as unknown as { status: string })
        .status,
    ).toBe('completed')
    expect(s.runs.map((run) => run.session.header.agentPreset)).toEqual(['reviewer', 'typo'])
  })

  it('an unknown or unsafe name, or no definitions configured, starts nothing', async () => {
    const s = await setup()
    writeFileSync(join(s.root, 'secret.md'), REVIEWER.replaceAll('reviewer', 'secret'))
    const tool = s.subagent(agentDefinitions({ root: s.root, project: s.project }))
    expect((await failure(tool.execute({ agent: 'ghost', prompt: 'go' }, { agent: s.parent }))).code).toBe('AGENT_NOT_FOUND')
    expect((await failure(tool.execute({ agent: '../../secret', prompt: 'go' }, { agent: s.parent }))).code).toBe('AGENT_NAME_INVALID')
    const unconfigured = await failure(s.subagent().execute({ agent: 'reviewer', prompt: 'go' }, { agent: s.parent }))
    expect(unconfigured).toMatchObject({ code: 'AGENT_NOT_FOUND', message: expect.stringContaining('no agent directories are configured') })
    expect(await s.childIds()).toEqual([])
  })

  it('without agent, a continuable call still needs a label', async () => {
    const s = await setup()
    const error = await failure(s.subagent().execute({ prompt: 'go', mode: 'continuable' }, { agent: s.parent }))
    expect(error.code).toBe('TOOL_SUBAGENT_CONTROL_INVALID_INPUT')
  })
})
