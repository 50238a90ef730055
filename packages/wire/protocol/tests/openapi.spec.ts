import { readFileSync } from 'node:fs'
import { Validator } from '@seriousme/openapi-schema-validator'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { routes } from '../src/index.js'
import { API_VERSION, ERROR_STATUSES, JSON_SCHEMA_DIALECT, openApiDocument, openApiPath } from '../src/openapi.js'
import type { ApiRoute } from '../src/routes.js'

const document = openApiDocument()
const table = Object.entries(routes) as Array<[string, ApiRoute]>

describe('openApiDocument', () => {
  it('validates as an OpenAPI 3.1 document (@seriousme/openapi-schema-validator)', async () => {
    const validator = new Validator()
    const result = await validator.validate(structuredClone(document))
    expect(result.errors).toBeUndefined()
    expect(result.valid).toBe(true)
    expect(validator.version).toBe('3.1')
  })

  it('is checked by a validator that refuses a broken document (a response without its description)', async () => {
    const broken = structuredClone(document) as unknown as { paths: Record<string, { get: { responses: Record<string, object> } }> }
    const { description: _, ...withoutDescription } = broken.paths['/api/sessions']!.get.responses['200'] as { description: string }
    broken.paths['/api/sessions']!.get.responses['200'] = withoutDescription
    const result = await new Validator().validate(broken)
    expect(result.valid).toBe(false)
  })

  it('has every route of the table, and nothing else, with its parameters, answer, errors and authentication', () => {
    const operations = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.entries(item).map(([method, op]) => ({ path, method, op })),
    )
    expect(operations.map((o) => o.op.operationId).sort()).toEqual(Object.keys(routes).sort())
    for (const [name, route] of table) {
      const op = document.paths[openApiPath(route.path)]?.[route.method.toLowerCase()]
      expect(op?.operationId, name).toBe(name)
      if (op === undefined) continue
      // Path parameters: exactly the `:name` segments, each required.
      const pathNames = route.path.split('/').flatMap((segment) => (segment.startsWith(':') ? [segment.slice(1)] : []))
      expect(Object.keys(route.params.shape)).toEqual(pathNames)
      expect(op.parameters.filter((p) => p.in === 'path').map((p) => [p.name, p.required])).toEqual(pathNames.map((n) => [n, true]))
      // Query parameters: every key of the query schema; required exactly when the schema refuses a missing value.
      expect(op.parameters.filter((p) => p.in === 'query').map((p) => [p.name, p.required])).toEqual(
        Object.entries(route.query.shape).map(([key, schema]) => [key, !schema.safeParse(undefined).success]),
      )
      // Each parameter schema is the table's input schema.
      for (const p of op.parameters) {
        const source = (p.in === 'path' ? route.params : route.query).shape[p.name] as z.ZodType
        const { $schema: _, ...expected } = z.toJSONSchema(source, { io: 'input', unrepresentable: 'any' })
        expect(p.schema, `${name} ${p.name}`).toEqual(expected)
      }
      // The answer: a component that is the route's response schema.
      const ok = op.responses['200']
      const media = ok?.content[route.answer === 'json' ? 'application/json' : 'text/event-stream']
      const ref = (route.answer === 'json' ? media?.schema : media?.['x-dsh-message-schema'])?.$ref
      expect(typeof ref, name).toBe('string')
      const component = document.components.schemas[String(ref).replace('#/components/schemas/', '')]
      const { $schema: _s, ...answer } = z.toJSONSchema(route.response, { io: 'output', unrepresentable: 'any' })
      expect(component, name).toEqual(answer)
      // The typed error body on every error status.
      for (const status of ERROR_STATUSES) {
        expect(op.responses[status]?.content['application/json']?.schema).toEqual({ $ref: '#/components/schemas/ErrorBody' })
      }
      expect(op.security).toEqual(route.auth === 'header' ? [{ bearer: [] }] : [{ bearer: [] }, { queryToken: [] }])
      // No route takes a body: the table declares none, and so does the document.
      expect(op).not.toHaveProperty('requestBody')
    }
  })

  it('names components after the schemas the package exports', () => {
    expect(Object.keys(document.components.schemas).sort()).toEqual(
      [
        'CompactionResult',
        'ErrorBody',
        'HistoryPage',
        'OpenApiDocumentBody',
        'SearchPage',
        'SessionListPage',
        'SessionStatsReport',
        'StreamEvent',
        'SubagentList',
      ].sort(),
    )
    expect(document.paths['/api/sessions/{parentId}/subagents/{childId}/history']?.get?.responses['200']?.content).toEqual({
      'application/json': { schema: { $ref: '#/components/schemas/HistoryPage' } },
    })
  })

  it('declares the one action, compaction, as a POST with its query and no body, behind the header token only', () => {
    const item = document.paths['/api/sessions/{id}/compact']
    expect(Object.keys(item ?? {})).toEqual(['post'])
    expect(item?.post?.operationId).toBe('compact')
    expect(item?.post?.parameters.map((p) => [p.name, p.in, p.required])).toEqual([
      ['id', 'path', true],
      ['keep', 'query', false],
    ])
    expect(item?.post?.security).toEqual([{ bearer: [] }])
    expect(item?.post?.responses['200']?.content).toEqual({
      'application/json': { schema: { $ref: '#/components/schemas/CompactionResult' } },
    })
    const others = Object.values(document.paths).flatMap((path) => Object.keys(path).filter((method) => method !== 'get'))
    expect(others).toEqual(['post'])
  })

  it('states the 2020-12 dialect, the package version, and no schema-level $schema', () => {
    const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
    expect(document.jsonSchemaDialect).toBe(JSON_SCHEMA_DIALECT)
    expect(document.info.version).toBe(API_VERSION)
    expect(API_VERSION).toBe(manifest.version)
    expect(JSON.stringify(document)).not.toContain('"$schema"')
  })

  it('is deterministic and its frame is what the route table declares for the document route', () => {
    expect(JSON.stringify(openApiDocument())).toBe(JSON.stringify(document))
    expect(routes.openapi.response.safeParse(document).success).toBe(true)
  })
})

describe('openApiPath', () => {
  it('turns `:name` segments into `{name}`', () => {
    expect(openApiPath('/api/sessions/:parentId/subagents/:childId/history')).toBe('/api/sessions/{parentId}/subagents/{childId}/history')
    expect(openApiPath('/api/sessions')).toBe('/api/sessions')
  })
})
