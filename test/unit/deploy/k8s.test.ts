import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { loadConfig, OPTIONS, type OptionKey } from '@reach/core';
import { QUIET_SERVICE_NODE_FLAGS, QUIET_SERVICES } from '@reach/cli';

/** The node flags the quiet services add (packages/cli local/stack.ts), as the local stack runs them. */
const quietFlags = (name: string): string[] => (QUIET_SERVICES.includes(name) ? [...QUIET_SERVICE_NODE_FLAGS] : []);

// The Kubernetes manifests (R-H2), validated against the Kubernetes API schemas twice over:
// kubernetes-models' JSON-schema validators (types, formats, enums, required fields) and its
// TypeScript types of the same API, which reject unknown fields the way `kubectl
// --validate=strict` does (a misspelt `readinessprobe` passes a plain JSON-schema check).
// Then what only this project knows: replicas, probes on the health endpoints, PDBs, resources.

interface Probe {
  httpGet?: { path: string; port: number | string };
}
interface Container {
  name: string;
  args?: string[];
  ports?: Array<{ name?: string; containerPort: number }>;
  env?: Array<{ name: string; value?: string }>;
  envFrom?: Array<{ configMapRef?: { name: string }; secretRef?: { name: string } }>;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  securityContext?: { readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean };
}
interface PodTemplate {
  metadata?: { labels?: Record<string, string> };
  spec: { containers: Container[]; restartPolicy?: string; securityContext?: { runAsNonRoot?: boolean } };
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: {
    replicas?: number;
    selector?: { matchLabels?: Record<string, string> } & Record<string, string>;
    template?: PodTemplate;
    minAvailable?: number | string;
    ports?: Array<{ port: number; targetPort?: number | string }>;
  };
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

const DIR = 'deploy/k8s';
const kustomization = parse(readFileSync(join(DIR, 'kustomization.yaml'), 'utf8')) as {
  resources: string[];
  namespace: string;
  images: Array<{ name: string }>;
};
const manifestFiles = readdirSync(DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
const objects: Array<{ file: string; obj: K8sObject }> = manifestFiles.flatMap((file) =>
  parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((d) => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
    return { file, obj: d.toJS() as K8sObject };
  }),
);
const all = objects.map((o) => o.obj);
const ofKind = (kind: string) => all.filter((o) => o.kind === kind);
const serviceDirs = readdirSync('services', { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name);
const label = (o: K8sObject) => `${o.kind}/${o.metadata?.name}`;
const selects = (selector: Record<string, string> | undefined, labels: Record<string, string> | undefined) =>
  !!selector && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);

/** kubernetes-models' module of an apiVersion/kind: `apps/v1` + Deployment → kubernetes-models/apps/v1/Deployment. */
const modelModule = (o: K8sObject) => `kubernetes-models/${o.apiVersion}/${o.kind}`;

describe('Kubernetes manifests', () => {
  it('are all listed in kustomization.yaml, in one namespace, with the image to override', () => {
    expect([...kustomization.resources].sort()).toEqual([...manifestFiles].sort());
    expect(kustomization.namespace).toBe('agent-reach');
    expect(kustomization.images.map((i) => i.name)).toContain('agent-reach');
    expect(ofKind('Namespace').map((n) => n.metadata.name)).toEqual([kustomization.namespace]);
  });

  it.each(objects.map((o) => [`${o.file}: ${label(o.obj)}`, o.obj] as const))('%s validates against the Kubernetes schema', async (_name, obj) => {
    const mod = (await import(modelModule(obj))) as Record<string, new (data: unknown) => { validate(): void }>;
    const Model = mod[obj.kind];
    expect(Model, `${modelModule(obj)} exports ${obj.kind}`).toBeTypeOf('function');
    expect(() => new Model!(obj).validate()).not.toThrow();
  });

  it('have no field the Kubernetes API does not know (strict, like kubectl --validate=strict)', () => {
    // Each object becomes a typed object literal; TypeScript's excess-property check then names
    // any field that is not in the API type, at any depth.
    const virtual = resolve(DIR, '__manifests__.ts');
    const lines: string[] = [];
    const owner: Array<{ line: number; what: string }> = [];
    const kinds = new Map<string, string>();
    objects.forEach(({ file, obj }, i) => {
      const key = modelModule(obj);
      if (!kinds.has(key)) kinds.set(key, `K${kinds.size}`);
      owner.push({ line: lines.length, what: `${file}: ${label(obj)}` });
      lines.push(...`export const o${i}: ${kinds.get(key)} = ${JSON.stringify(obj, null, 1)};`.split('\n'));
    });
    const imports = [...kinds].map(([mod, alias]) => `import type { I${mod.split('/').pop()} as ${alias} } from '${mod}';`);
    const source = [...imports, ...lines].join('\n');
    const offset = imports.length;
    const options: ts.CompilerOptions = {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: [],
    };
    const host = ts.createCompilerHost(options);
    const { getSourceFile, fileExists, readFile } = host;
    host.getSourceFile = (name, lang, ...rest) => (name === virtual ? ts.createSourceFile(name, source, lang) : getSourceFile.call(host, name, lang, ...rest));
    host.fileExists = (name) => name === virtual || fileExists.call(host, name);
    host.readFile = (name) => (name === virtual ? source : readFile.call(host, name));
    const program = ts.createProgram([virtual], options, host);
    const file = program.getSourceFile(virtual)!;
    const problems = ts.getPreEmitDiagnostics(program, file).map((d) => {
      const text = ts.flattenDiagnosticMessageText(d.messageText, ' ');
      if (d.start === undefined) return text;
      const line = file.getLineAndCharacterOfPosition(d.start).line - offset;
      const at = owner.filter((o) => o.line <= line).at(-1);
      return `${at?.what ?? 'imports'}: ${text}`;
    });
    expect(problems).toEqual([]);
  });

  it('run every service and the console as a Deployment of ≥ 2 replicas with its own port', () => {
    const deployments = ofKind('Deployment');
    expect(serviceDirs.length).toBeGreaterThanOrEqual(8);
    for (const name of serviceDirs) {
      const d = deployments.find((x) => x.metadata.name === name);
      expect(d, `a Deployment for services/${name}`).toBeDefined();
      expect(d!.spec!.replicas, name).toBeGreaterThanOrEqual(2);
      const c = d!.spec!.template!.spec.containers[0]!;
      expect(c.args).toEqual([...quietFlags(name), `services/${name}/dist/main.js`]);
      const port = Object.values(OPTIONS).find((o) => o.env === `REACH_${name.toUpperCase().replace(/-/g, '_')}_PORT`)?.default;
      expect(c.ports?.map((p) => p.containerPort)).toEqual([port]);
    }
    expect(deployments.length).toBe(serviceDirs.length);
  });

  it('probe readiness on /readyz and liveness on /healthz, with requests and a memory limit, as non-root', () => {
    for (const d of ofKind('Deployment')) {
      expect(selects(d.spec!.selector!.matchLabels, d.spec!.template!.metadata?.labels), `${label(d)} selector matches its pods`).toBe(true);
      expect(d.spec!.template!.spec.securityContext?.runAsNonRoot, label(d)).toBe(true);
      for (const c of d.spec!.template!.spec.containers) {
        const port = c.ports![0]!;
        for (const [probe, path] of [
          [c.readinessProbe, '/readyz'],
          [c.livenessProbe, '/healthz'],
        ] as const) {
          expect(probe?.httpGet?.path, `${label(d)} ${path}`).toBe(path);
          expect([port.name, port.containerPort]).toContain(probe!.httpGet!.port);
        }
        expect(c.resources?.requests?.cpu, label(d)).toBeTruthy();
        expect(c.resources?.requests?.memory, label(d)).toBeTruthy();
        expect(c.resources?.limits?.memory, label(d)).toBeTruthy();
        expect(c.securityContext?.allowPrivilegeEscalation, label(d)).toBe(false);
      }
    }
  });

  it('give every Deployment a Service and a PodDisruptionBudget (minAvailable 1) selecting exactly its pods', () => {
    const deployments = ofKind('Deployment');
    const podLabels = (d: K8sObject) => d.spec!.template!.metadata?.labels;
    for (const kind of ['Service', 'PodDisruptionBudget']) {
      for (const d of deployments) {
        const matching = ofKind(kind).filter((o) => selects(kind === 'Service' ? o.spec!.selector : o.spec!.selector?.matchLabels, podLabels(d)));
        expect(matching.length, `${kind} for ${label(d)}`).toBe(1);
        if (kind === 'PodDisruptionBudget') expect(matching[0]!.spec!.minAvailable).toBe(1);
        if (kind === 'Service') expect(matching[0]!.spec!.ports?.[0]?.port).toBe(d.spec!.template!.spec.containers[0]!.ports![0]!.containerPort);
      }
      // …and none selects pods of two Deployments or of none
      for (const o of ofKind(kind)) {
        const sel = kind === 'Service' ? o.spec!.selector : o.spec!.selector?.matchLabels;
        expect(deployments.filter((d) => selects(sel, podLabels(d))).length, label(o)).toBe(1);
      }
    }
  });

  it('run the deploy step (migrations, topics, schemas) as a Job', () => {
    const jobs = ofKind('Job');
    expect(jobs).toHaveLength(1);
    const pod = (jobs[0]!.spec as { template: PodTemplate }).template;
    expect(pod.spec.containers[0]!.args).toEqual(['packages/cli/dist/bin.js', 'setup']);
    expect(['OnFailure', 'Never']).toContain(pod.spec.restartPolicy);
  });

  it('configure every container from the ConfigMap and Secret, with REACH_* names and values the config catalog accepts', () => {
    const [config] = ofKind('ConfigMap');
    const [secret] = ofKind('Secret');
    const pods = [...ofKind('Deployment'), ...ofKind('Job')].map((o) => ({ o, pod: (o.spec as { template: PodTemplate }).template }));
    for (const { o, pod } of pods) {
      for (const c of pod.spec.containers) {
        const refs = c.envFrom ?? [];
        expect(refs.map((r) => r.configMapRef?.name ?? r.secretRef?.name).sort(), label(o)).toEqual([config!.metadata.name, secret!.metadata.name].sort());
        const env: Record<string, string> = { ...config!.data, ...secret!.stringData };
        for (const e of c.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
        env.REACH_INSTANCE_ID = 'pod-name'; // from the downward API
        for (const k of Object.keys(env).filter((x) => x.startsWith('REACH_'))) {
          expect(
            Object.values(OPTIONS).some((opt) => opt.env === k),
            `${label(o)}: ${k} is no option`,
          ).toBe(true);
        }
        expect(() => loadConfig(Object.keys(OPTIONS) as OptionKey[], env), label(o)).not.toThrow();
      }
    }
  });

  describe('README', () => {
    let readme: string;
    beforeAll(() => {
      readme = readFileSync(join(DIR, 'README.md'), 'utf8');
    });

    it('says how partitions bound the replicas and what the cluster must provide', () => {
      expect(readme).toContain('REACH_TOPIC_PARTITIONS');
      expect(readme).toMatch(/managed services or\s+operators/);
      for (const name of serviceDirs.filter((n) => n !== 'registry' && n !== 'console')) expect(readme).toContain(`reach-${name}`);
    });
  });
});
