{{/*
Names. The full name is truncated at 63 characters (DNS label); suffixes are
kept short so that <fullname>-headless and <fullname>-metrics still fit.
*/}}
{{- define "orderwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "orderwatch.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 54 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 54 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 54 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "orderwatch.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "orderwatch.instanceLabels" -}}
app.kubernetes.io/name: {{ include "orderwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Selector labels of the watcher pod: immutable on a StatefulSet, never change
them. The component keeps the helm test pod out of the Services and the PDB.
*/}}
{{- define "orderwatch.selectorLabels" -}}
{{ include "orderwatch.instanceLabels" . }}
app.kubernetes.io/component: watcher
{{- end }}

{{- define "orderwatch.labels" -}}
helm.sh/chart: {{ include "orderwatch.chart" . }}
{{ include "orderwatch.instanceLabels" . }}
app.kubernetes.io/version: {{ include "orderwatch.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: orderwatch
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "orderwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "orderwatch.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "orderwatch.imageTag" -}}
{{- .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "orderwatch.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (include "orderwatch.imageTag" .) }}
{{- end }}
{{- end }}

{{/*
The Secret holding the passwords: the one the chart creates, or existingSecret.
*/}}
{{- define "orderwatch.secretName" -}}
{{- .Values.existingSecret.name | default (include "orderwatch.fullname" .) }}
{{- end }}

{{/*
Fleet mode (fleet.enabled): the pods, the shops Secret and the state volume.
*/}}
{{- define "orderwatch.replicas" -}}
{{- if .Values.fleet.enabled }}{{ int .Values.fleet.replicas }}{{ else }}{{ int .Values.replicaCount }}{{ end }}
{{- end }}
{{- define "orderwatch.shopsDir" -}}/etc/orderwatch/shops{{- end }}
{{- define "orderwatch.shopsSecretName" -}}
{{- .Values.fleet.shops.existingSecret | default (printf "%s-shops" (include "orderwatch.fullname" .)) }}
{{- end }}
{{/* "true" when the state directory is a claim per pod (volumeClaimTemplates or existingClaim). */}}
{{- define "orderwatch.stateClaim" -}}
{{- if .Values.fleet.enabled }}{{ if .Values.fleet.persistentState }}true{{ end }}
{{- else if .Values.persistence.enabled }}true{{ end }}
{{- end }}
{{/* "true" when the pod mounts the Secret "secret" (the REST password; in
fleet mode only the NATS password or token, the shops' are in the shops Secret). */}}
{{- define "orderwatch.secretVolume" -}}
{{- if or (not .Values.fleet.enabled) (include "orderwatch.natsPassword" .) (include "orderwatch.natsToken" .) }}true{{ end }}
{{- end }}

{{/* "true" when a NATS password / token file is mounted, else "". */}}
{{- define "orderwatch.natsPassword" -}}
{{- if .Values.existingSecret.name }}{{ if .Values.existingSecret.natsPasswordKey }}true{{ end }}
{{- else if .Values.nats.password }}true{{ end }}
{{- end }}
{{- define "orderwatch.natsToken" -}}
{{- if .Values.existingSecret.name }}{{ if .Values.existingSecret.natsTokenKey }}true{{ end }}
{{- else if .Values.nats.token }}true{{ end }}
{{- end }}

{{/*
Checks the schema cannot express. Included by the StatefulSet, so any
install, upgrade, template or lint stops here with one clear line.
*/}}
{{- define "orderwatch.validate" -}}
{{- $grace := int64 .Values.shutdown.terminationGracePeriodSeconds }}
{{- $timeout := int64 .Values.shutdown.timeoutSeconds }}
{{- /* The watcher may overrun its timeout by ~2s (a minimum 1s flush, 1s HTTP shutdown, closing bbolt). */}}
{{- if lt $grace (add $timeout 5) }}
{{- fail (printf "shutdown.terminationGracePeriodSeconds (%d) must be at least shutdown.timeoutSeconds (%d) + 5: the kubelet kills the watcher when the grace period runs out, before it has flushed the outbox and closed the state file" $grace $timeout) }}
{{- end }}
{{- if .Values.existingSecret.name }}
{{- range $v := list "plenty.password" "nats.password" "nats.token" }}
{{- $parts := splitList "." $v }}
{{- if index $.Values (index $parts 0) (index $parts 1) }}
{{- fail (printf "%s is set but existingSecret.name is %q: the chart would ignore it; put it in that Secret (see existingSecret.*Key) and unset %s" $v $.Values.existingSecret.name $v) }}
{{- end }}
{{- end }}
{{- end }}
{{- if lt (int64 .Values.publish.outboxMax) 1 }}
{{- fail (printf "publish.outboxMax is %d: it must be at least 1 (the watcher reads 0 as unlimited, which lets a NATS outage fill the state volume, and OrderwatchOutboxFull would compare the depth with 0 and fire forever)" (int64 .Values.publish.outboxMax)) }}
{{- end }}
{{- if .Values.fleet.enabled }}
{{- include "orderwatch.validateFleet" . }}
{{- else }}
{{- if and (gt (int .Values.replicaCount) 1) (or (not .Values.standby.enabled) (not .Values.stream.name)) }}
{{- fail (printf "replicaCount is %d but the hot standby is off (standby.enabled false or stream.name empty): every replica would poll the shop and publish every event" (int .Values.replicaCount)) }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 2) (not .Values.standby.allowExtraStandbys) }}
{{- fail (printf "replicaCount is %d: hot standby is one active pod and one standby (replicaCount 2). Each further standby only mirrors the stream (no second poller, no faster takeover), needs its own claim and node, and keeps a token for its next tenure: %d replicas may hold all three sessions the shop shares with its other integrations. Set standby.allowExtraStandbys=true if that is meant (e.g. to ride out two node failures)" (int .Values.replicaCount) (int .Values.replicaCount)) }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) .Values.persistence.existingClaim }}
{{- fail "persistence.existingClaim is one volume for one pod: with replicaCount > 1 every pod needs its own (volumeClaimTemplates)" }}
{{- end }}
{{- end }}
{{- if and .Values.persistence.existingClaim (not .Values.persistence.enabled) }}
{{- fail "persistence.existingClaim is set but persistence.enabled is false: the chart would ignore the claim and keep the state on an emptyDir" }}
{{- end }}
{{- $own := list "state" "tmp" "secret" "shops" "nats-creds" "nats-nkey" "nats-tls" }}
{{- range .Values.extraVolumes }}
{{- if has .name $own }}
{{- fail (printf "extraVolumes: the name %q is one of the chart's own volumes (%s)" .name (join ", " $own)) }}
{{- end }}
{{- end }}
{{- with .Values.nats.tls }}
{{- if and .enabled (not .secretName) }}
{{- fail "nats.tls.enabled is true but nats.tls.secretName is empty" }}
{{- end }}
{{- if and .enabled (not .ca) (not .cert) }}
{{- fail "nats.tls.enabled is true but neither nats.tls.ca nor nats.tls.cert names a key" }}
{{- end }}
{{- if ne (empty .cert) (empty .key) }}
{{- fail "nats.tls.cert and nats.tls.key go together (mutual TLS): set both or neither" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Fleet mode's checks (orderwatch.validate): what the binary would refuse at
start-up (exit 2, a crash loop) or what would leave a shop without its password.
*/}}
{{- define "orderwatch.validateFleet" -}}
{{- $f := .Values.fleet }}
{{- if or (not .Values.standby.enabled) (not .Values.stream.name) }}
{{- fail "fleet.enabled needs JetStream (stream.name) and the lease (standby.enabled): the members share the shops out by one lease per shop" }}
{{- end }}
{{- if .Values.persistence.existingClaim }}
{{- fail "persistence.existingClaim is one volume for one pod: fleet mode runs fleet.replicas pods (fleet.persistentState gives each its own claim)" }}
{{- end }}
{{- if and $f.shops.existingSecret (or $f.shops.registry $f.shops.passwords) }}
{{- fail (printf "fleet.shops.existingSecret is %q: fleet.shops.registry and fleet.shops.passwords would be ignored; put them in that Secret" $f.shops.existingSecret) }}
{{- end }}
{{- if and (not $f.shops.existingSecret) (not $f.shops.registry) }}
{{- fail "fleet.enabled: set fleet.shops.existingSecret (a Secret holding the registry, see examples/fleet-shops-secret.yaml) or, for trying it out, fleet.shops.registry" }}
{{- end }}
{{- if hasKey $f.shops.passwords $f.shops.key }}
{{- fail (printf "fleet.shops.passwords: the key %q is the registry's (fleet.shops.key)" $f.shops.key) }}
{{- end }}
{{- $dir := include "orderwatch.shopsDir" . }}
{{- $ids := dict }}
{{- range $i, $e := $f.shops.registry }}
{{- if hasKey $ids $e.id }}
{{- fail (printf "fleet.shops.registry[%d]: the id %q is used twice" $i $e.id) }}
{{- end }}
{{- $_ := set $ids $e.id true }}
{{- if hasKey $e "password" }}
{{- fail (printf "fleet.shops.registry[%d] (id %q): a password in clear is not accepted (it would sit in the registry and in the release's values): put it in fleet.shops.passwords (key -> password) and name it with \"passwordFile\": \"%s/<key>\", or set \"passwordEnv\" to a variable given with extraEnv" $i $e.id $dir) }}
{{- end }}
{{- if and $e.passwordFile $e.passwordEnv }}
{{- fail (printf "fleet.shops.registry[%d] (id %q): passwordFile and passwordEnv both set: name one" $i $e.id) }}
{{- end }}
{{- if not (or $e.passwordFile $e.passwordEnv) }}
{{- fail (printf "fleet.shops.registry[%d] (id %q): no password reference: set passwordFile (%s/<key of fleet.shops.passwords>) or passwordEnv" $i $e.id $dir) }}
{{- end }}
{{- with $e.passwordFile }}
{{- if and (hasPrefix (printf "%s/" $dir) .) (not (hasKey $f.shops.passwords (trimPrefix (printf "%s/" $dir) .))) }}
{{- fail (printf "fleet.shops.registry[%d] (id %q): passwordFile %s names no key of fleet.shops.passwords" $i $e.id .) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Mount points of the Secrets. The file names inside are fixed by "items", so
the WATCHER_*_FILE paths do not depend on the key names in the Secret.
*/}}
{{- define "orderwatch.secretDir" -}}/etc/orderwatch/secret{{- end }}
{{- define "orderwatch.natsCredsDir" -}}/etc/orderwatch/nats-creds{{- end }}
{{- define "orderwatch.natsNkeyDir" -}}/etc/orderwatch/nats-nkey{{- end }}
{{- define "orderwatch.natsTLSDir" -}}/etc/orderwatch/nats-tls{{- end }}

{{/* Environment variables pointing at the mounted secret files. */}}
{{- define "orderwatch.secretEnv" -}}
{{- if not .Values.fleet.enabled }}
- name: WATCHER_PLENTY_PASSWORD_FILE
  value: {{ include "orderwatch.secretDir" . }}/plenty-password
{{- end }}
{{- if include "orderwatch.natsPassword" . }}
- name: WATCHER_NATS_PASSWORD_FILE
  value: {{ include "orderwatch.secretDir" . }}/nats-password
{{- end }}
{{- if include "orderwatch.natsToken" . }}
- name: WATCHER_NATS_TOKEN_FILE
  value: {{ include "orderwatch.secretDir" . }}/nats-token
{{- end }}
{{- if .Values.nats.credentials.secretName }}
- name: WATCHER_NATS_CREDS
  value: {{ include "orderwatch.natsCredsDir" . }}/nats.creds
{{- end }}
{{- if .Values.nats.nkey.secretName }}
- name: WATCHER_NATS_NKEY
  value: {{ include "orderwatch.natsNkeyDir" . }}/nkey.seed
{{- end }}
{{- with .Values.nats.tls }}
{{- if .enabled }}
{{- if .ca }}
- name: WATCHER_NATS_TLS_CA
  value: {{ include "orderwatch.natsTLSDir" $ }}/ca.crt
{{- end }}
{{- if .cert }}
- name: WATCHER_NATS_TLS_CERT
  value: {{ include "orderwatch.natsTLSDir" $ }}/tls.crt
- name: WATCHER_NATS_TLS_KEY
  value: {{ include "orderwatch.natsTLSDir" $ }}/tls.key
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "orderwatch.secretVolumeMounts" -}}
{{- if include "orderwatch.secretVolume" . }}
- name: secret
  mountPath: {{ include "orderwatch.secretDir" . }}
  readOnly: true
{{- end }}
{{- if .Values.fleet.enabled }}
# The registry and the shops' password files: the whole Secret (no subPath,
# no items), so that a change of the Secret reaches the running members.
- name: shops
  mountPath: {{ include "orderwatch.shopsDir" . }}
  readOnly: true
{{- end }}
{{- if .Values.nats.credentials.secretName }}
- name: nats-creds
  mountPath: {{ include "orderwatch.natsCredsDir" . }}
  readOnly: true
{{- end }}
{{- if .Values.nats.nkey.secretName }}
- name: nats-nkey
  mountPath: {{ include "orderwatch.natsNkeyDir" . }}
  readOnly: true
{{- end }}
{{- if .Values.nats.tls.enabled }}
- name: nats-tls
  mountPath: {{ include "orderwatch.natsTLSDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* defaultMode 288 = 0440: readable by the owner and the fsGroup only. */}}
{{- define "orderwatch.secretVolumes" -}}
{{- if include "orderwatch.secretVolume" . }}
- name: secret
  secret:
    secretName: {{ include "orderwatch.secretName" . }}
    defaultMode: 288
    items:
      {{- if not .Values.fleet.enabled }}
      - key: {{ ternary .Values.existingSecret.plentyPasswordKey "plenty-password" (not (empty .Values.existingSecret.name)) }}
        path: plenty-password
      {{- end }}
      {{- if include "orderwatch.natsPassword" . }}
      - key: {{ ternary .Values.existingSecret.natsPasswordKey "nats-password" (not (empty .Values.existingSecret.name)) }}
        path: nats-password
      {{- end }}
      {{- if include "orderwatch.natsToken" . }}
      - key: {{ ternary .Values.existingSecret.natsTokenKey "nats-token" (not (empty .Values.existingSecret.name)) }}
        path: nats-token
      {{- end }}
{{- end }}
{{- if .Values.fleet.enabled }}
- name: shops
  secret:
    secretName: {{ include "orderwatch.shopsSecretName" . }}
    defaultMode: 288
{{- end }}
{{- with .Values.nats.credentials }}
{{- if .secretName }}
- name: nats-creds
  secret:
    secretName: {{ .secretName }}
    defaultMode: 288
    items:
      - key: {{ .key }}
        path: nats.creds
{{- end }}
{{- end }}
{{- with .Values.nats.nkey }}
{{- if .secretName }}
- name: nats-nkey
  secret:
    secretName: {{ .secretName }}
    defaultMode: 288
    items:
      - key: {{ .key }}
        path: nkey.seed
{{- end }}
{{- end }}
{{- with .Values.nats.tls }}
{{- if .enabled }}
- name: nats-tls
  secret:
    secretName: {{ .secretName }}
    defaultMode: 288
    items:
      {{- if .ca }}
      - key: {{ .ca }}
        path: ca.crt
      {{- end }}
      {{- if .cert }}
      - key: {{ .cert }}
        path: tls.crt
      - key: {{ .key }}
        path: tls.key
      {{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The watcher container: image, configuration, secret files, GOMEMLIMIT,
security context and resources.
*/}}
{{- define "orderwatch.containerCommon" -}}
image: {{ include "orderwatch.image" . | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
envFrom:
  - configMapRef:
      name: {{ include "orderwatch.fullname" . }}
env:
  {{- include "orderwatch.secretEnv" . | trim | nindent 2 }}
  # The replica's name in the hot-standby lease: the pod name.
  - name: WATCHER_INSTANCE_ID
    valueFrom:
      fieldRef:
        fieldPath: metadata.name
  {{- if include "orderwatch.goMemLimit" . }}
  # The memory limit in bytes: the Go GC's soft limit.
  - name: GOMEMLIMIT
    valueFrom:
      resourceFieldRef:
        containerName: watcher
        resource: limits.memory
  {{- end }}
  {{- with .Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- include "orderwatch.securityContext" . }}
{{- with .Values.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "orderwatch.securityContext" -}}
{{- with .Values.securityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* "true" when GOMEMLIMIT comes from the memory limit: asked for, a limit
set, and no GOMEMLIMIT in extraEnv (that one wins). */}}
{{- define "orderwatch.goMemLimit" -}}
{{- $own := false }}
{{- range .Values.extraEnv }}{{ if eq .name "GOMEMLIMIT" }}{{ $own = true }}{{ end }}{{ end }}
{{- if and .Values.goMemLimit.fromMemoryLimit (dig "limits" "memory" "" .Values.resources) (not $own) }}true{{ end }}
{{- end }}

{{/* Pod-level settings shared by the StatefulSet and the test pod. */}}
{{- define "orderwatch.podCommon" -}}
serviceAccountName: {{ include "orderwatch.serviceAccountName" . }}
automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
# Service links would add <SERVICE>_PORT... variables; a Service called
# "watcher-..." in the namespace would even inject WATCHER_* names.
enableServiceLinks: false
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
