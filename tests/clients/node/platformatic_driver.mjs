#!/usr/bin/env node
// Drives a broker with @platformatic/kafka (which speaks only flexible protocol versions) through
// the full flow of tests/clients/README.md: create a topic; produce keyed records with headers
// with every codec (acks=all, idempotent); consume them back byte-identical; seek to an offset
// and to a timestamp; alter topic configs (retention.ms shrinks the log, max.message.bytes
// refuses a batch); add partitions; delete records; describe a group (members, offsets, lag)
// and reset its offsets; delete the topics. Stored segments are checked with
// tests/clients/segments.py. Each step's result is printed (RESULT lines) and the run goes on
// after a failed step; the exit status is non-zero if any step failed.
//
// Notes on the client:
//   - 1.x is the newest line that runs on Node 20 (2.x wants Node >= 22.22).
//   - It compresses zstd with node:zlib, which Node 20 lacks; the driver plugs in zstd-napi
//     (the kafkajs driver's zstd too), so zstd batches still go out in this client's framing.
//   - It has no assign(): every read joins a consumer group of its own (one member, so it gets
//     every partition) and starts from explicit offsets (mode 'manual').
//
//   node platformatic_driver.mjs --bootstrap HOST:PORT --topic-prefix P --log-dir DIR
//                                [--timeout S] [--small] [--codecs none,gzip,...] [--full]
import { execFileSync } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import util from 'node:util'
import * as kafka from '@platformatic/kafka'

const { Admin, Consumer, Producer, compressionsAlgorithms } = kafka
const require = createRequire(import.meta.url)
const here = path.dirname(fileURLToPath(import.meta.url))

const NAME = 'platformatic'
const PARTITIONS = 3
const ALL_CODECS = ['none', 'gzip', 'snappy', 'lz4', 'zstd']
// The full flow's fixed figures: the same as tests/clients/driverlib.py's.
const RET_SUFFIX = '-ret'
const SEGMENT_MS = 100
const RET_RECORDS = 6
const RETENTION_MS = 1000
const MAX_MESSAGE_BYTES = 2048
const BIG_VALUE_BYTES = 8192
const NEW_PARTITIONS = 4
const NEW_RECORDS = 3
const LAG = 2
const TOPIC_RESOURCE = 2 // ConfigResourceTypes.TOPIC
const SET = 0 // IncrementalAlterConfigOperationTypes.SET
const TOPIC_CONFIG_SOURCE = 1 // DYNAMIC_TOPIC_CONFIG

if (!compressionsAlgorithms.zstd.available) {
  const zstd = require('zstd-napi')
  Object.assign(compressionsAlgorithms.zstd, {
    compressSync: (data) => zstd.compress(Buffer.isBuffer(data) ? data : data.buffer),
    decompressSync: (data) => zstd.decompress(Buffer.isBuffer(data) ? data : data.buffer),
    available: true,
  })
}

class DriverError extends Error {}
const fail = (msg) => {
  throw new DriverError(msg)
}
const check = (cond, msg) => {
  if (!cond) fail(msg)
}

function parseArgs(argv) {
  const a = { timeout: 60, small: false, codecs: ALL_CODECS.slice() }
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i]
    const v = () => {
      if (i + 1 >= argv.length) usage(`${k} needs a value`)
      return argv[++i]
    }
    if (k === '--bootstrap') a.bootstrap = v()
    else if (k === '--topic-prefix') a.prefix = v()
    else if (k === '--log-dir') a.logDir = v()
    else if (k === '--timeout') a.timeout = Number(v())
    else if (k === '--small') a.small = true
    else if (k === '--full') a.full = true
    else if (k === '--codecs') a.codecs = v().split(',').filter(Boolean)
    else usage(`unknown argument ${k}`)
  }
  if (!a.bootstrap || !a.prefix || !a.logDir) usage('--bootstrap, --topic-prefix, --log-dir are required')
  for (const c of a.codecs) if (!ALL_CODECS.includes(c)) usage(`unknown codec ${c}`)
  return a
}

function usage(msg) {
  console.error(`${NAME}: ${msg}\nusage: platformatic_driver.mjs --bootstrap HOST:PORT --topic-prefix P ` +
    '--log-dir DIR [--timeout S] [--small] [--codecs c1,c2] [--full]')
  process.exit(2)
}

const t0 = Date.now()
const step = (msg) => console.log(`[${NAME} ${((Date.now() - t0) / 1000).toFixed(2).padStart(6)}s] ${msg}`)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
// The client nests errors (MultipleErrors of ResponseErrors of ProtocolErrors): one line with
// each level's message and Kafka error name, without the stacks.
function errText(e, depth = 0) {
  if (e instanceof DriverError) return e.message
  if (!(e instanceof Error) || depth > 6) return util.inspect(e, { depth: 2, breakLength: Infinity })
  let s = `${e.name === 'Error' ? '' : `${e.name}: `}${e.message}`
  const tags = [e.code, e.apiId].filter(Boolean)
  if (tags.length) s += ` (${tags.join(', ')})`
  const subs = [...(Array.isArray(e.errors) ? e.errors : []), ...(e.cause ? [e.cause] : [])]
  if (subs.length) s += ` <- [${subs.map((x) => errText(x, depth + 1)).join('; ')}]`
  return s
}

// Each step's result is kept and the run goes on after a failed step (driverlib.Flow).
const results = []
async function run(id, title, fatal, body) {
  const start = Date.now()
  let err = null
  try {
    await body()
  } catch (e) {
    err = errText(e)
  }
  results.push({ id, title, err })
  const took = `${((Date.now() - start) / 1000).toFixed(1)}s`
  step(`step ${id} (${title}) ${err === null ? `passed in ${took}` : `FAILED after ${took}: ${err}`}`)
  if (err !== null && fatal) finish()
}

function finish() {
  for (const r of results) {
    console.log(`RESULT ${r.id.padEnd(6)} ${r.title.padEnd(28)} ${r.err === null ? 'PASS' : `FAIL: ${r.err}`}`)
  }
  const bad = results.filter((r) => r.err !== null).map((r) => r.id)
  if (bad.length) {
    console.error(`${NAME}: FAIL: steps failed: ${bad.join(', ')}`)
    process.exit(1)
  }
  step('PASS')
  process.exit(0)
}

// The shapes of driverlib.make_records: values start with "<codec>|" for the segment check;
// the filler makes compression pay off. Header keys are Buffers: a Map keyed by Buffer objects
// keeps repeated keys apart (strings would collapse them).
const FILLER = Buffer.from('samsa-kafka-compatible-log-broker;'.repeat(8))
const hdrs = (pairs) => new Map(pairs.map(([k, v]) => [Buffer.from(k), Buffer.isBuffer(v) ? v : Buffer.from(v)]))
function makeRecords(codec, prefix, count, tBase, start) {
  const out = []
  for (let i = 0; i < count; i++) {
    const g = start + i
    const filler = Buffer.concat([FILLER, FILLER.subarray(0, (i * 37) % FILLER.length)])
    const key = i === 1 ? null : Buffer.concat([Buffer.from(`key-${codec}-${i}`), Buffer.from([0, 255, i % 256])])
    const value = Buffer.concat([Buffer.from(`${codec}|${prefix}|${String(i).padStart(4, '0')}|`), filler,
      Buffer.from([0, 128 + (i % 128)])])
    const headers = [
      [],
      [['h1', 'v1'], ['bin', Buffer.from([0, 1, 254, 255])]],
      [['dup', 'a'], ['dup', 'b'], ['empty', Buffer.alloc(0)]],
      [['codec', codec]],
    ][i % 4]
    out.push({ partition: i % PARTITIONS, key, value, headers, timestamp: tBase + g * 10, codec })
  }
  return out
}

function checkRecord(p, offset, w, g, what) {
  const where = `partition ${p} offset ${g.offset} (${what}, codec ${w.codec})`
  check(g.partition === p, `${where}: from partition ${g.partition}`)
  check(g.offset === BigInt(offset), `${where}: expected offset ${offset}`)
  const gk = g.key === undefined || g.key === null ? null : g.key
  check((gk === null && w.key === null) || (gk !== null && w.key !== null && gk.equals(w.key)),
    `${where}: key ${gk && gk.toString('hex')} != produced ${w.key && w.key.toString('hex')}`)
  check(g.value && g.value.equals(w.value), `${where}: value differs from the produced one`)
  const gh = [...g.headers.entries()].map(([k, v]) => [Buffer.from(k).toString(), Buffer.from(v || [])])
  check(gh.length === w.headers.length, `${where}: ${gh.length} headers, produced ${w.headers.length}`)
  w.headers.forEach(([k, v], i) => {
    const vb = Buffer.isBuffer(v) ? v : Buffer.from(v)
    check(gh[i][0] === k && gh[i][1].equals(vb), `${where}: header ${i} is ${gh[i][0]}=${gh[i][1].toString('hex')}, produced ${k}=${vb.toString('hex')}`)
  })
  check(g.timestamp === BigInt(w.timestamp), `${where}: timestamp ${g.timestamp} != produced ${w.timestamp}`)
}

function comparePartition(p, want, got, what, first = 0) {
  check(got.length === want.length, `partition ${p}: ${what} ${got.length} records from offset ${first}, produced ${want.length}`)
  want.forEach((w, i) => checkRecord(p, first + i, w, got[i], `${what} #${i}`))
}

async function main(args) {
  const base = { clientId: 'samsa-platformatic-driver', bootstrapBrokers: [args.bootstrap], timeout: 15000, retries: 3 }
  const admin = new Admin(base)
  const topic = `${args.prefix}-platformatic`
  const ret = topic + RET_SUFFIX
  step(`@platformatic/kafka ${JSON.parse(fs.readFileSync(path.join(here, 'node_modules/@platformatic/kafka/package.json'))).version}, ` +
    `node ${process.version}, broker ${args.bootstrap}`)

  const partitionsOf = async (t) => {
    const md = await admin.metadata({ topics: [t], forceUpdate: true })
    const td = md.topics.get(t)
    return td ? td.partitionsCount ?? td.partitions.length : -1
  }
  const waitFor = async (pred, ms, what) => {
    const deadline = Date.now() + ms
    for (;;) {
      let v = false
      try {
        v = await pred()
      } catch (e) {
        if (Date.now() > deadline) throw e
      }
      if (v) return v
      check(Date.now() < deadline, `timed out after ${ms / 1000}s waiting for ${what}`)
      await sleep(200)
    }
  }

  const produce = async (t, recs, codec, each = false) => {
    const p = new Producer({ ...base, compression: codec, acks: -1, idempotent: true, repeatOnStaleMetadata: true })
    try {
      const msgs = recs.map((r) => ({
        topic: t,
        partition: r.partition,
        key: r.key === null ? undefined : r.key,
        value: r.value,
        headers: hdrs(r.headers),
        timestamp: BigInt(r.timestamp),
      }))
      if (each) for (const m of msgs) await p.send({ messages: [m] })
      else await p.send({ messages: msgs })
    } finally {
      await p.close()
    }
  }

  // Reads `want[p]` records of each partition, from `from[p]` (offsets) or the group's commits.
  let groups = 0
  const consume = async ({ t, from, want, group, ms = 30000, onRead }) => {
    const c = new Consumer({ ...base, groupId: group || `${args.prefix}-platformatic-read-${groups++}`, maxWaitTime: 500, sessionTimeout: 10000, heartbeatInterval: 1000 })
    const opts = { topics: [t], autocommit: false }
    if (from) Object.assign(opts, { mode: 'manual', offsets: Object.entries(from).map(([p, o]) => ({ topic: t, partition: Number(p), offset: BigInt(o) })) })
    else Object.assign(opts, { mode: 'committed', fallbackMode: 'earliest' })
    const got = {}
    for (const p of Object.keys(want)) got[p] = []
    const done = () => Object.entries(want).every(([p, n]) => got[p].length >= n)
    let stream
    let timer
    try {
      stream = await c.consume(opts)
      const timeout = new Promise((resolve, reject) => {
        timer = setTimeout(() => reject(new DriverError(`consume timed out after ${ms / 1000}s: have ${JSON.stringify(Object.fromEntries(Object.entries(got).map(([p, l]) => [p, l.length])))}, want ${JSON.stringify(want)}`)), ms)
      })
      const reading = (async () => {
        if (done()) return
        for await (const m of stream) {
          const l = got[m.partition]
          if (l && l.length < want[m.partition]) l.push(m)
          if (done()) break
        }
      })()
      await Promise.race([reading, timeout])
      if (onRead) await onRead(c)
    } finally {
      clearTimeout(timer)
      if (stream) await stream.close().catch(() => {})
      await c.close(true).catch(() => {})
    }
    return got
  }

  const listOffsets = async (t, parts, timestamp) => {
    const res = await admin.listOffsets({ topics: [{ name: t, partitions: parts.map((p) => ({ partitionIndex: p, timestamp })) }] })
    const out = {}
    for (const pr of res[0].partitions) out[pr.partitionIndex] = pr.offset
    return out
  }
  const EARLIEST = -2n
  const LATEST = -1n

  const configs = async (t) => {
    const res = await admin.describeConfigs({ resources: [{ resourceType: TOPIC_RESOURCE, resourceName: t, configurationKeys: null }] })
    return Object.fromEntries(res[0].configs.map((c) => [c.name, c]))
  }
  // Kafka answers an alter once the controller committed it; its brokers apply the metadata
  // record a moment later, so DescribeConfigs is asked until it shows the new value.
  const awaitConfigs = (t, want) => waitFor(async () => {
    const c = await configs(t)
    return Object.entries(want).every(([k, v]) => c[k] && c[k].value === v) && c
  }, 10000, `DescribeConfigs of ${t} to show ${JSON.stringify(want)}`)

  let produced = []
  const perPart = {}

  await run('1', 'create topic', true, async () => {
    await admin.createTopics({ topics: [topic], partitions: PARTITIONS, replicas: 1 })
    await waitFor(async () => (await partitionsOf(topic)) === PARTITIONS, 15000, `metadata for ${topic}`)
    step(`created ${topic} with ${PARTITIONS} partitions`)
  })

  await run('2', 'produce every codec', true, async () => {
    const tBase = Date.now() - 600000
    const count = args.small ? 3 : 30
    for (const codec of args.codecs) {
      const recs = makeRecords(codec, args.prefix, count, tBase, produced.length)
      await produce(topic, recs, codec)
      produced = produced.concat(recs)
      step(`produced ${recs.length} records with compression ${codec}, acks=all, idempotent`)
    }
    for (let p = 0; p < PARTITIONS; p++) perPart[p] = produced.filter((r) => r.partition === p)
    checkSegments(args, topic, produced)
  })
  const counts = Object.fromEntries(Object.entries(perPart).map(([p, l]) => [p, l.length]))

  await run('3', 'consume byte-identical', false, async () => {
    const parts = [...Array(PARTITIONS).keys()]
    const lo = await listOffsets(topic, parts, EARLIEST)
    const hi = await listOffsets(topic, parts, LATEST)
    for (const p of parts) {
      check(lo[p] === 0n && hi[p] === BigInt(counts[p]), `partition ${p}: offsets (${lo[p]}, ${hi[p]}), expected (0, ${counts[p]})`)
    }
    step('ListOffsets earliest/latest match the produced counts')
    const got = await consume({ t: topic, from: Object.fromEntries(parts.map((p) => [p, 0])), want: counts })
    for (const p of parts) comparePartition(p, perPart[p], got[p], 'consumed')
    step(`consumed all ${produced.length} records back byte-identical, in order per partition`)
  })

  await run('4a', 'seek to an offset', false, async () => {
    const p = 2
    const off = Math.floor(perPart[p].length / 3)
    const got = await consume({ t: topic, from: { [p]: off }, want: { [p]: 1 } })
    checkRecord(p, off, perPart[p][off], got[p][0], 'after seek')
    step(`seek to partition ${p} offset ${off}: first record is the right one`)
  })

  await run('4b', 'seek to a timestamp', false, async () => {
    const p = 1
    const idx = Math.floor(perPart[p].length / 2)
    const ts = perPart[p][idx].timestamp - 3
    const o = (await listOffsets(topic, [p], BigInt(ts)))[p]
    check(o === BigInt(idx), `ListOffsets(${ts}) on partition ${p} gave ${o}, expected ${idx}`)
    const got = await consume({ t: topic, from: { [p]: o }, want: { [p]: 1 } })
    checkRecord(p, idx, perPart[p][idx], got[p][0], `after seek to time ${ts}`)
    step(`ListOffsets by timestamp on partition ${p} -> offset ${idx}, first record matches`)
  })

  await run('5a', 'retention.ms shrinks the log', false, async () => {
    await admin.createTopics({ topics: [ret], partitions: 1, replicas: 1, configs: [{ name: 'segment.ms', value: String(SEGMENT_MS) }] })
    await waitFor(async () => (await partitionsOf(ret)) === 1, 15000, `metadata for ${ret}`)
    const tBase = Date.now() - 600000
    const recs = []
    for (let i = 0; i < RET_RECORDS; i++) {
      recs.push({ partition: 0, key: Buffer.from(`ret-${i}`), value: Buffer.concat([Buffer.from(`none|${args.prefix}|ret|${i}|`), FILLER]),
        headers: [['r', String(i)]], timestamp: tBase + i * 1000, codec: 'none' })
    }
    await produce(ret, recs, 'none', true)
    check((await listOffsets(ret, [0], EARLIEST))[0] === 0n, `${ret}: earliest is not 0`)
    step(`${ret}: ${RET_RECORDS} records in batches of their own, 1 s of record time apart, segment.ms=${SEGMENT_MS}`)
    await admin.incrementalAlterConfigs({ resources: [{ resourceType: TOPIC_RESOURCE, resourceName: ret, configs: [{ name: 'retention.ms', configOperation: SET, value: String(RETENTION_MS) }] }] })
    const c = (await awaitConfigs(ret, { 'retention.ms': String(RETENTION_MS) }))['retention.ms']
    check(c.configSource === TOPIC_CONFIG_SOURCE, `${ret}: retention.ms has source ${c.configSource}`)
    step(`IncrementalAlterConfigs retention.ms=${RETENTION_MS}; DescribeConfigs shows ${c.value} (source ${c.configSource}: DYNAMIC_TOPIC_CONFIG)`)
    const start = await waitFor(async () => (await listOffsets(ret, [0], EARLIEST))[0], 20000, `${ret}'s log start to move (retention)`)
    step(`retention deleted old segments: ${ret}-0 now starts at offset ${start}`)
  })

  await run('5b', 'max.message.bytes refuses', false, async () => {
    const want = { 'segment.ms': String(SEGMENT_MS), 'retention.ms': String(RETENTION_MS), 'max.message.bytes': String(MAX_MESSAGE_BYTES) }
    // Legacy AlterConfigs replaces the topic's whole dynamic config: name all of it.
    await admin.alterConfigs({ resources: [{ resourceType: TOPIC_RESOURCE, resourceName: ret, configs: Object.entries(want).map(([name, value]) => ({ name, value })) }] })
    await awaitConfigs(ret, want)
    step(`AlterConfigs max.message.bytes=${MAX_MESSAGE_BYTES} (with the other two kept)`)
    const end = (await listOffsets(ret, [0], LATEST))[0]
    let err = null
    try {
      await produce(ret, [{ partition: 0, key: Buffer.from('big'), value: crypto.randomBytes(BIG_VALUE_BYTES), headers: [], timestamp: Date.now() }], 'none')
    } catch (e) {
      err = e
    }
    check(err !== null, `a ${BIG_VALUE_BYTES}-byte record was accepted with max.message.bytes=${MAX_MESSAGE_BYTES}`)
    check(errText(err).includes('MESSAGE_TOO_LARGE'), `the large record failed with ${errText(err)}, expected MESSAGE_TOO_LARGE`)
    const after = (await listOffsets(ret, [0], LATEST))[0]
    check(after === end, `${ret}: end offset moved from ${end} to ${after}`)
    step(`a ${BIG_VALUE_BYTES}-byte record is refused: MESSAGE_TOO_LARGE`)
  })

  const parts = { ...perPart }
  const np = NEW_PARTITIONS - 1
  await run('6', 'add partitions', false, async () => {
    await admin.createPartitions({ topics: [{ name: topic, count: NEW_PARTITIONS }] })
    await waitFor(async () => (await partitionsOf(topic)) === NEW_PARTITIONS, 15000, `${topic} to show ${NEW_PARTITIONS} partitions`)
    const tBase = Date.now() - 300000
    const recs = []
    for (let i = 0; i < NEW_RECORDS; i++) {
      recs.push({ partition: np, key: Buffer.concat([Buffer.from(`new-${i}`), Buffer.from([0, 255])]),
        value: Buffer.concat([Buffer.from(`none|${args.prefix}|new|${i}|`), FILLER, Buffer.from([0, 200 + i])]),
        headers: [['new', String(i)], ['bin', Buffer.from([0, 255])]], timestamp: tBase + i * 10, codec: 'lz4' })
    }
    await produce(topic, recs, 'lz4')
    const got = await consume({ t: topic, from: { [np]: 0 }, want: { [np]: NEW_RECORDS } })
    comparePartition(np, recs, got[np], 'consumed')
    parts[np] = recs
    step(`CreatePartitions ${topic} -> ${NEW_PARTITIONS}; produced ${NEW_RECORDS} records to partition ${np} and read them back`)
  })

  let start0 = 0
  await run('7', 'delete records', false, async () => {
    const cut = Math.floor(perPart[0].length / 2)
    const res = await admin.deleteRecords({ topics: [{ name: topic, partitions: [{ partition: 0, offset: BigInt(cut) }] }] })
    const low = res[0].partitions[0].lowWatermark
    check(low === BigInt(cut), `DeleteRecords answered low watermark ${low}, expected ${cut}`)
    check((await listOffsets(topic, [0], EARLIEST))[0] === BigInt(cut), `${topic}-0: ListOffsets earliest is not ${cut} after DeleteRecords`)
    const got = await consume({ t: topic, from: { 0: (await listOffsets(topic, [0], EARLIEST))[0] }, want: { 0: 1 } })
    checkRecord(0, cut, perPart[0][cut], got[0][0], 'from the log start after DeleteRecords')
    start0 = cut
    step(`DeleteRecords ${topic}-0 before ${cut}: low watermark ${cut}, reading from the log start starts there`)
  })

  const group = `${args.prefix}-platformatic-group`
  const committedOffsets = async () => {
    const res = await admin.listConsumerGroupOffsets({ groups: [group] })
    const out = {}
    for (const t of res[0].topics) if (t.name === topic) for (const p of t.partitions) out[p.partitionIndex] = p.committedOffset
    return out
  }

  await run('8a', 'describe group, lag', false, async () => {
    const n = Object.keys(parts).length
    const want = Object.fromEntries(Object.entries(parts).map(([p, l]) => [p, l.length - (Number(p) === 0 ? start0 : 0)]))
    const commit = Object.fromEntries(Object.entries(parts).map(([p, l]) => [p, BigInt(l.length - LAG)]))
    const got = await consume({
      t: topic, group, want, ms: 40000,
      onRead: async (c) => {
        await c.commit({ offsets: Object.entries(commit).map(([p, o]) => ({ topic, partition: Number(p), offset: o, leaderEpoch: -1 })) })
        const d = (await admin.describeGroups({ groups: [group] })).get(group)
        check(d, `DescribeGroups: no ${group}`)
        check(d.state === 'STABLE', `group ${group} is ${d.state}, want STABLE`)
        check(d.members.size === 1, `group ${group}: ${d.members.size} members, want 1`)
        const [m] = d.members.values()
        const a = m.assignments && m.assignments.get(topic)
        const assigned = a ? [...a.partitions].sort((x, y) => x - y) : []
        check(assigned.length === n, `group ${group}: member ${m.id} is assigned ${JSON.stringify(assigned)}, want 0..${n - 1}`)
        step(`DescribeGroups: ${d.state}, member ${m.id} (${m.clientId}, ${m.clientHost}) holds partitions ${JSON.stringify(assigned)}`)
        const have = await committedOffsets()
        const ends = await listOffsets(topic, Object.keys(parts).map(Number), LATEST)
        for (const [p, o] of Object.entries(commit)) {
          check(have[p] === o, `group ${group}: ${topic}-${p} committed ${have[p]}, want ${o}`)
          check(ends[p] - have[p] === BigInt(LAG), `group ${group}: ${topic}-${p} lag ${ends[p] - have[p]}, want ${LAG}`)
        }
        step(`group offsets committed at end-${LAG}, lag ${LAG} on every partition`)
      },
    })
    for (const [p, l] of Object.entries(parts)) {
      const from = Number(p) === 0 ? start0 : 0
      comparePartition(Number(p), l.slice(from), got[p], 'group-consumed', from)
    }
  })

  await run('8b', 'reset group offsets', false, async () => {
    await waitFor(async () => {
      const d = (await admin.describeGroups({ groups: [group] })).get(group)
      return d && d.state === 'EMPTY' && d.members.size === 0
    }, 15000, `group ${group} to be empty after its member left`)
    const reset = Object.fromEntries(Object.keys(parts).map((p) => [p, Number(p) === 0 ? start0 + 1 : 1 + (Number(p) % 2)]))
    await admin.alterConsumerGroupOffsets({ groupId: group, topics: [{ name: topic, partitionOffsets: Object.entries(reset).map(([p, o]) => ({ partition: Number(p), offset: BigInt(o) })) }] })
    const have = await committedOffsets()
    for (const [p, o] of Object.entries(reset)) check(have[p] === BigInt(o), `group ${group}: ${topic}-${p} at ${have[p]} after reset to ${o}`)
    const want = Object.fromEntries(Object.entries(parts).map(([p, l]) => [p, l.length - reset[p]]))
    const got = await consume({ t: topic, group, want, ms: 40000 })
    for (const [p, l] of Object.entries(parts)) comparePartition(Number(p), l.slice(reset[p]), got[p], 'consumed after reset', reset[p])
    step(`reset group offsets to ${JSON.stringify(reset)}; the group consumed from there, byte-identical`)
  })

  await run('9', 'delete topic', false, async () => {
    await admin.deleteTopics({ topics: [topic, ret] })
    await waitFor(async () => {
      const names = await admin.listTopics()
      return !names.includes(topic) && !names.includes(ret)
    }, 15000, 'the topics to disappear')
    step(`deleted ${topic}, ${ret}`)
  })
  await admin.close().catch(() => {})
  finish()
}

function checkSegments(args, topic, produced) {
  const expect = { topic, partitions: PARTITIONS, expected: {} }
  for (const r of produced) expect.expected[r.codec] = (expect.expected[r.codec] || 0) + 1
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'platformatic-driver-'))
  const spec = path.join(tmp, 'expect.json')
  fs.writeFileSync(spec, JSON.stringify(expect))
  try {
    const out = execFileSync('/usr/bin/python3', [path.join(here, '..', 'segments.py'), 'check', args.logDir, spec],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30000 })
    for (const line of out.trim().split('\n')) step(line)
  } catch (e) {
    fail(`stored segments: ${(e.stderr || e.message).trim()}`)
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

const args = parseArgs(process.argv)
setTimeout(() => {
  console.error(`${NAME}: FAIL: hard timeout of ${args.timeout}s reached`)
  process.exit(3)
}, args.timeout * 1000).unref()
main(args).catch((e) => {
  console.error(`${NAME}: FAIL: ${errText(e)}`)
  process.exit(1)
})
