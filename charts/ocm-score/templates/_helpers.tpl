{{/* The labels every object of ours carries; `name` is the component (app.kubernetes.io/name). */}}
{{- define "ocm-score.labels" -}}
{{ with .name }}app.kubernetes.io/name: {{ . }}
{{ end -}}
app.kubernetes.io/part-of: ocm-score
{{- end -}}

{{/* The controllers' image, `repository:tag` (tag defaults to the chart's appVersion). */}}
{{- define "ocm-score.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
"true" when ocm-score-hub addon-manager runs: the add-on is on and its mode is `manager` (empty
otherwise, so `if include` reads it). The mode is checked where the ClusterManagementAddOn is made.
*/}}
{{- define "ocm-score.runsAddonManager" -}}
{{- if and .Values.addonManager.enabled (eq .Values.install.mode "manager") }}true{{ end -}}
{{- end -}}

{{/* The agents' image: agent.image, or the controllers' image. */}}
{{- define "ocm-score.agentImage" -}}
{{- default (include "ocm-score.image" .) .Values.agent.image -}}
{{- end -}}

{{/*
A hub controller's Deployment. Arguments (a dict): root (the chart's `.`), name (the Deployment, its
ServiceAccount and its Lease), container, values (the component's values), args (the mode and its
flags), and optionally volumes/volumeMounts/ports (lists), annotations (pod template annotations) and
unelected (true for a mode without leader election: no Lease settings).
*/}}
{{- define "ocm-score.deployment" -}}
{{- $root := .root -}}
{{- $values := .values -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "ocm-score.labels" (dict "name" .name) | nindent 4 }}
spec:
  replicas: {{ $values.replicas }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
  template:
    metadata:
      labels:
        {{- include "ocm-score.labels" (dict "name" .name) | nindent 8 }}
      {{- with .annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ .name }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        # Non-root as the image's numeric USER says; no fixed ids (OpenShift's restricted SCC picks them).
        runAsNonRoot: true
        seccompProfile:
          type: RuntimeDefault
      {{- with $values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .container }}
          image: {{ include "ocm-score.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: [ocm-score-hub]
          args:
            {{- range .args }}
            - {{ . }}
            {{- end }}
            - --metrics-bind-address=0.0.0.0:8080
            {{- range $values.extraArgs }}
            - {{ . }}
            {{- end }}
          env:
            {{- if not .unelected }}
            - name: OCM_SCORE_LEADER_ELECTION_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: OCM_SCORE_LEADER_ELECTION_IDENTITY
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            {{- end }}
            - name: RUST_LOG
              value: {{ $root.Values.logLevel | quote }}
          ports:
            - name: metrics
              containerPort: 8080
              protocol: TCP
            {{- with .ports }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          livenessProbe:
            httpGet:
              path: /healthz
              port: metrics
            periodSeconds: 20
          readinessProbe:
            httpGet:
              path: /readyz
              port: metrics
            periodSeconds: 10
          {{- with $values.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            runAsNonRoot: true
            privileged: false
            capabilities:
              drop: [ALL]
          {{- with .volumeMounts }}
          volumeMounts:
            {{- toYaml . | nindent 12 }}
          {{- end }}
      {{- with .volumes }}
      volumes:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/* A controller's ServiceAccount. Arguments: root, name. */}}
{{- define "ocm-score.serviceAccount" -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "ocm-score.labels" (dict "name" .name) | nindent 4 }}
{{- end -}}

{{/* A controller's ClusterRoleBinding to the ClusterRole of its own name. Arguments: root, name. */}}
{{- define "ocm-score.clusterRoleBinding" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .name }}
  labels:
    {{- include "ocm-score.labels" (dict "name" .name) | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ .name }}
    namespace: {{ .root.Release.Namespace }}
{{- end -}}

{{/* Leader election: only the controller's own Lease (named as it), in its own namespace. */}}
{{- define "ocm-score.leaderElectionRbac" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}-leader-election
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "ocm-score.labels" (dict "name" .name) | nindent 4 }}
rules:
  # A create cannot be limited to a name.
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [{{ .name }}]
    verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}-leader-election
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "ocm-score.labels" (dict "name" .name) | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .name }}-leader-election
subjects:
  - kind: ServiceAccount
    name: {{ .name }}
    namespace: {{ .root.Release.Namespace }}
{{- end -}}

{{/*
A PodDisruptionBudget: a drain takes the controller's replicas one at a time, so a standby is left
to take the Lease. Arguments: root, name, values.
*/}}
{{- define "ocm-score.podDisruptionBudget" -}}
{{- if and .values.podDisruptionBudget.enabled (gt (int .values.replicas) 1) -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "ocm-score.labels" (dict "name" .name) | nindent 4 }}
spec:
  maxUnavailable: {{ .values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
{{- end -}}
{{- end -}}
