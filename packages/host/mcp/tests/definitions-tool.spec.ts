import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { agentDefinitions } from '@dsh/agent-definitions'
import { createHost, type Host } from '@dsh/host'
import { subagentControlTools } from '@dsh/tool-subagent-control'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { createMcpServer } from '../src/index.js'
import { connectClient } from './support.js'

let dir: string
let root: string
let project: string
let host: Host
let client: Client | undefined

async function connect(options: Parameters<typeof createMcpServer>[1]): Promise<Client> {
  const next = await connectClient(host.ctx, options)
  return next
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-mcp-defs-'))
  root = join(dir, 'root')
  project = join(dir, 'project')
  host = await createHost({ root })
  mkdirSync(join(root, '.dsh', 'agents'), { recursive: true })
  mkdirSync(join(project, '.dsh', 'agents'), { recursive: true })
  writeFileSync(join(root, '.dsh', 'agents', 'scout.md'), '---\nname: scout\ndescription: Finds files.\n---\nList them.\n')
  writeFileSync(
    join(project, '.dsh', 'agents', 'scout.md'),
    '---\nname: scout\ndescription: Finds test files.\nmodel: m1\ntools: [grep]\nbudgets:\n  maxTurns: 2\n---\nOnly tests/.\n',
  )
})

afterEach(async () => {
  await client?.close()
  client = undefined
  await host.dispose()
  rmSync(dir, { recursive: true, force: true })
})

describe('list_agent_definitions', () => {
  it('is listed beside the read tools and answers the definitions, the project overriding the root', async () => {
    client = await connect({ agentDefinitions: agentDefinitions({ root, project }) })
    const { tools } = await client.listTools()
    const tool = tools.find((t) => t.name === 'list_agent_definitions')
    expect(tool?.inputSchema).toMatchObject({ type: 'object', additionalProperties: false })
    expect(tool?.description).toContain('agent: <name>')

    const result = await client.callTool({ name: 'list_agent_definitions', arguments: {} })
    expect(result.isError ?? false).toBe(false)
    expect(result.structuredContent).toEqual({
      directories: [
        { scope: 'root', dir: join(root, '.dsh', 'agents') },
        { scope: 'project', dir: join(project, '.dsh', 'agents') },
      ],
      definitions: [
        {
          name: 'scout',
          description: 'Finds test files.',
          model: 'm1',
          tools: ['grep'],
          budgets: { maxTurns: 2 },
          scope: 'project',
          file: join(project, '.dsh', 'agents', 'scout.md'),
          overrides: join(root, '.dsh', 'agents', 'scout.md'),
        },
      ],
    })
    expect(result.content).toEqual([
      { type: 'text', text: 'scout (project, overrides root) — "Finds test files."; model m1; tools grep; budgets {"maxTurns":2}' },
    ])
  })

  it('a bad definition file is an isError result whose code and message name the file and line', async () => {
    writeFileSync(join(root, '.dsh', 'agents', 'broken.md'), '---\nname: broken\ndescription: d\nbudgets:\n  maxTurns: many\n---\nx\n')
    client = await connect({ agentDefinitions: agentDefinitions({ root, project }) })
    const result = await client.callTool({ name: 'list_agent_definitions', arguments: {} })
    expect(result.isError).toBe(true)
    const { error } = result.structuredContent as { error: { code: string; message: string } }
    expect(error.code).toBe('AGENT_DEFINITION_INVALID')
    expect(error.message).toMatch(new RegExp(`^${join(root, '.dsh', 'agents', 'broken.md')}:5: 'budgets.maxTurns' `))

    const extra = await client.callTool({ name: 'list_agent_definitions', arguments: { scope: 'all' } })
    expect((extra.structuredContent as { error: { code: string } }).error.code).toBe('MCP_INVALID_INPUT')
  })

  it("with control tools, subagent {agent} starts the project's definition; a bad definition starts nothing", async () => {
    writeFileSync(join(root, '.dsh', 'agents', 'broken.md'), '---\nname: broken\ndescription: d\nmodle: x\n---\nx\n')
    const agents = agentDefinitions({ root, project })
    const parent = host.sessions.create()
    client = await connect({
      agentDefinitions: agents,
      allowControl: true,
      control: host.subagents,
      controlTools: (control) => subagentControlTools(control, { agents }),
    })
    const started = await client.callTool({ name: 'subagent', arguments: { session: parent.id, agent: 'scout', prompt: 'look' } })
    expect(started.isError ?? false, JSON.stringify(started.content)).toBe(false)
    const id = (started.structuredContent as { id: string; agent: string; label: string }).id
    expect(started.structuredContent).toMatchObject({ agent: 'scout', label: 'scout' })
    const children = await host.query.listSessions({ parentSession: parent.id })
    expect(children.records.map((record) => [record.header.id, record.header.agentPreset])).toEqual([[id, 'scout']])

    const refused = await client.callTool({ name: 'subagent', arguments: { session: parent.id, agent: 'broken', prompt: 'look' } })
    expect(refused.isError).toBe(true)
    expect((refused.structuredContent as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'AGENT_DEFINITION_INVALID',
      message: expect.stringContaining(`${join(root, '.dsh', 'agents', 'broken.md')}:4: unknown key 'modle'`),
    })
    expect((await host.query.listSessions({ parentSession: parent.id })).records).toHaveLength(1)
  })

  it('is not offered without definitions configured', async () => {
    client = await connect({})
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).not.toContain('list_agent_definitions')
    const result = await client.callTool({ name: 'list_agent_definitions', arguments: {} })
    expect((result.structuredContent as { error: { code: string } }).error.code).toBe('MCP_UNKNOWN_TOOL')
  })
})
