import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { answer, callTools, type RecordedRequest, startModelServer } from '@dsh/driver-openai/testing'
import { agentDefinitionList } from '@dsh/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cleanEnv, dshRun, history } from './support/dsh-process.js'

// Runs the built CLI as a user would (turbo builds it before tests).
const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
const run = promisify(execFile)

async function dsh(cwd: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], { cwd })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

let dir: string
let root: string
let project: string
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-cli-agent-defs-'))
  root = join(dir, 'root')
  project = join(dir, 'project')
  mkdirSync(join(root, '.dsh', 'agents'), { recursive: true })
  mkdirSync(join(project, '.dsh', 'agents'), { recursive: true })
  writeFileSync(
    join(root, '.dsh', 'agents', 'reviewer.md'),
    '---\nname: reviewer\ndescription: root reviewer\nmodel: m-root\n---\nReview.\n',
  )
  writeFileSync(
    join(root, '.dsh', 'agents', 'scout.md'),
    '---\nname: scout\ndescription: "finds files\\e[2J\\nFORGED ROW"\nprovider: openai\nmodel: gpt-x\ntools: [grep]\nbudgets:\n  maxTurns: 3\n  maxCostUsd: 0.5\n---\nScout.\n',
  )
  writeFileSync(
    join(project, '.dsh', 'agents', 'reviewer.md'),
    '---\nname: reviewer\ndescription: project reviewer\nprovider: anthropic\nmodel: claude-x\ntools: []\n---\nReview here.\n',
  )
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('dsh agents --definitions', () => {
  it('--json lists one definition per name, the project overriding the root, with where each came from', async () => {
    const result = await dsh(project, 'agents', '--definitions', '--json', '--root', root)
    expect(result.code, result.stderr).toBe(0)
    expect(JSON.parse(result.stdout)).toEqual({
      directories: [
        { scope: 'root', dir: join(root, '.dsh', 'agents') },
        { scope: 'project', dir: join(project, '.dsh', 'agents') },
      ],
      definitions: [
        {
          name: 'reviewer',
          description: 'project reviewer',
          provider: 'anthropic',
          model: 'claude-x',
          tools: [],
          scope: 'project',
          file: join(project, '.dsh', 'agents', 'reviewer.md'),
          overrides: join(root, '.dsh', 'agents', 'reviewer.md'),
        },
        {
          name: 'scout',
          description: 'finds files\u001b[2J\nFORGED ROW',
          provider: 'openai',
          model: 'gpt-x',
          tools: ['grep'],
          budgets: { maxTurns: 3, maxCostUsd: 0.5 },
          scope: 'root',
          file: join(root, '.dsh', 'agents', 'scout.md'),
        },
      ],
    })
    // The protocol's shape, nothing beyond it (parsing drops unknown keys at every level).
    expect(agentDefinitionList.parse(JSON.parse(result.stdout))).toEqual(JSON.parse(result.stdout))
    // --project names the project directory explicitly.
    const elsewhere = await dsh(dir, 'agents', '--definitions', '--json', '--root', root, '--project', project)
    expect(JSON.parse(elsewhere.stdout)).toEqual(JSON.parse(result.stdout))
  })

  it('the text table escapes what the files hold: no terminal control, no forged row', async () => {
    const result = await dsh(project, 'agents', '--definitions', '--root', root)
    expect(result.code, result.stderr).toBe(0)
    const lines = result.stdout.trimEnd().split('\n')
    expect(lines).toHaveLength(4)
    expect(lines[0]).toMatch(/^NAME\s+SCOPE\s+MODEL\s+TOOLS\s+BUDGETS\s+DESCRIPTION$/)
    expect(lines[2]).toMatch(/^reviewer\s+project \(overrides root\)\s+anthropic claude-x\s+none\s+-\s+project reviewer$/)
    // grep is no tool dsh run gives a child: marked in the table, and a warning says starting scout is refused.
    expect(lines[3]).toMatch(/^scout\s+root\s+openai gpt-x\s+grep\(unknown\)\s+\$0\.5, 3 turns\s+finds files\\x1b\[2J\\x0aFORGED ROW$/)
    expect(result.stdout).not.toContain('\u001b')
    expect(result.stderr).toBe(
      `dsh: warning: ${join(root, '.dsh', 'agents', 'scout.md')}: tools names grep, which dsh run does not offer a subagent (it offers subagent, send_message, wait_agents, interrupt_agent, close_agent, report, list_agents); starting 'scout' is refused (AGENT_DEFINITION_UNSUPPORTED)\n`,
    )
  })

  it('tools dsh run offers are not marked; under --json the warning names the unknown ones on stderr', async () => {
    const known = join(dir, 'known')
    mkdirSync(join(known, '.dsh', 'agents'), { recursive: true })
    const file = join(known, '.dsh', 'agents', 'rev.md')
    writeFileSync(file, '---\nname: rev\ndescription: d\ntools: [list_agents, report]\n---\nBody.\n')
    const text = await dsh(known, 'agents', '--definitions', '--root', join(known, '.dsh'))
    expect(text.stdout).toMatch(/^rev\s+project\s+-\s+list_agents,report\s+/m)
    expect(text.stderr).toBe('')
    writeFileSync(file, '---\nname: rev\ndescription: d\ntools: [list_agents, nonexistent_tool]\n---\nBody.\n')
    const json = await dsh(known, 'agents', '--definitions', '--json', '--root', join(known, '.dsh'))
    expect(JSON.parse(json.stdout).definitions[0].tools).toEqual(['list_agents', 'nonexistent_tool'])
    expect(json.stderr).toContain(`${file}: tools names nonexistent_tool, which dsh run does not offer a subagent`)
  })

  it('a bad file fails the listing with a typed error naming the file and line', async () => {
    const bad = join(dir, 'bad')
    mkdirSync(join(bad, '.dsh', 'agents'), { recursive: true })
    writeFileSync(join(bad, '.dsh', 'agents', 'typo.md'), '---\nname: typo\ndescription: d\ntemprature: 1\n---\nBody.\n')
    const json = await dsh(bad, 'agents', '--definitions', '--json', '--root', root)
    expect(json.code).toBe(1)
    const { error } = JSON.parse(json.stdout) as { error: { code: string; message: string } }
    expect(error.code).toBe('AGENT_DEFINITION_INVALID')
    expect(error.message).toMatch(new RegExp(`^${join(bad, '.dsh', 'agents', 'typo.md')}:4: unknown key 'temprature'`))
    const text = await dsh(bad, 'agents', '--definitions', '--root', root)
    expect(text.code).toBe(1)
    expect(text.stderr).toContain("typo.md:4: unknown key 'temprature'")
    expect(text.stderr).toContain('(AGENT_DEFINITION_INVALID)')
  })

  it('bad YAML names the line it is on; a provider dsh has no driver for is refused at its line', async () => {
    const bad = join(dir, 'bad-yaml')
    mkdirSync(join(bad, '.dsh', 'agents'), { recursive: true })
    const file = join(bad, '.dsh', 'agents', 'bad.md')
    writeFileSync(file, '---\nname: bad\ndescription: [unclosed\n---\nbody\n')
    const yaml = await dsh(bad, 'agents', '--definitions', '--root', join(bad, '.dsh'))
    expect(yaml.code).toBe(1)
    expect(yaml.stderr).toContain(`${file}:3: invalid YAML: Flow sequence in block collection`)
    writeFileSync(file, '---\nname: bad\ndescription: d\nprovider: nosuchprovider\n---\nbody\n')
    const provider = await dsh(bad, 'agents', '--definitions', '--root', join(bad, '.dsh'))
    expect(provider.stderr).toBe(`dsh: ${file}:4: 'provider' must be one of openai, anthropic (AGENT_DEFINITION_INVALID)\n`)
  })

  it('--project without --definitions is a usage error saying where it belongs', async () => {
    const result = await dsh(project, 'agents', 'some-id', '--project', project, '--root', root)
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("--project is for 'dsh agents --definitions'")
    expect(result.stderr).toContain('(CLI_USAGE)')
  })

  it('no definitions is an empty list; a session id with --definitions is a usage error', async () => {
    const empty = join(dir, 'empty')
    mkdirSync(empty)
    const result = await dsh(empty, 'agents', '--definitions', '--json', '--root', join(empty, '.dsh'))
    expect(result.code, result.stderr).toBe(0)
    expect(JSON.parse(result.stdout).definitions).toEqual([])
    const text = await dsh(empty, 'agents', '--definitions', '--root', join(empty, '.dsh'))
    expect(text.stdout).toMatch(/^No agent definitions in /)
    expect((await dsh(empty, 'agents', 'some-id', '--definitions')).code).toBe(2)
  })
})

describe('dsh run with definitions it cannot honour', () => {
  it('an anthropic agent under --provider openai, or one naming a tool children are not offered, is a tool error and no child', async () => {
    const work = join(dir, 'run')
    const agents = join(work, '.dsh', 'agents')
    mkdirSync(agents, { recursive: true })
    writeFileSync(join(agents, 'anth.md'), '---\nname: anth\ndescription: d\nprovider: anthropic\nmodel: claude-z\n---\nBe anth.\n')
    writeFileSync(join(agents, 'rev.md'), '---\nname: rev\ndescription: d\ntools: [list_agents, nonexistent_tool]\n---\nReview.\n')
    writeFileSync(join(agents, 'ok.md'), '---\nname: ok\ndescription: d\nprovider: openai\ntools: [list_agents]\n---\nBe ok.\n')
    const calls = ['anth', 'rev', 'ok']
    const results = (request: RecordedRequest) => request.body.messages.filter((m) => m.role === 'tool')
    const firstUser = (request: RecordedRequest) => String(request.body.messages.find((m) => m.role === 'user')?.content ?? '')
    const server = await startModelServer((request) => {
      if (firstUser(request).startsWith('KID')) return answer(['kid done'])
      const n = results(request).length
      if (n < calls.length)
        return callTools([{ id: `c${n}`, name: 'subagent', arguments: JSON.stringify({ agent: calls[n], prompt: `KID ${calls[n]}` }) }])
      return answer(['parent done'])
    })
    try {
      const env = cleanEnv({ DSH_API_KEY: 'sk-e2e-defs-3f9a' })
      const result = await dshRun(['run', 'go', '--root', join(work, 'root'), '--base-url', server.baseURL], env, work)
      expect(result.code, result.stdout + result.stderr).toBe(0)
      const id = /^session (\S+)$/m.exec(result.stdout)![1]!
      const events = await history(id, join(work, 'root'), env, work)
      const [anth, rev, ok] = events.filter((e) => e.type === 'tool/result').map((e) => e.data)
      expect(anth).toMatchObject({ isError: true, content: { code: 'AGENT_DEFINITION_UNSUPPORTED' } })
      expect(JSON.stringify(anth!.content)).toContain("asks for provider 'anthropic', but subagents here run on 'openai'")
      expect(rev).toMatchObject({ isError: true, content: { code: 'AGENT_DEFINITION_UNSUPPORTED' } })
      expect(JSON.stringify(rev!.content)).toContain('would not be offered: nonexistent_tool')
      expect(ok).toMatchObject({ content: { status: 'completed', agent: 'ok' } })
      // Only the agent it can honour ran: one child request, and no model named claude-z was ever asked.
      expect(server.requests.filter((request) => firstUser(request).startsWith('KID')).map(firstUser)).toEqual(['KID ok'])
      expect(server.requests.some((request) => request.body.model === 'claude-z')).toBe(false)
      const listed = await dshRun(['agents', id, '--json', '--root', join(work, 'root')], env, work)
      expect(JSON.parse(listed.stdout).rows).toHaveLength(1)
    } finally {
      await server.close()
    }
  })
})
