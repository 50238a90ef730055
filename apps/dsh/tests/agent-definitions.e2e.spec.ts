import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { agentDefinitionList } from '@dsh/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

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
    expect(lines[3]).toMatch(/^scout\s+root\s+openai gpt-x\s+grep\s+\$0\.5, 3 turns\s+finds files\\x1b\[2J\\x0aFORGED ROW$/)
    expect(result.stdout).not.toContain('\u001b')
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
